package sandboxes

import "syscall"

// DiskSpace is the space an unprivileged writer has left on the filesystem holding path, and its size, in bytes.
func DiskSpace(path string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
