package sandboxes

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mountSocketFS mounts a sized tmpfs on dir unless one is there already (a restart of a stopped sandbox, or a
// gateway restart, finds the one an earlier launch made). It is mounted before the container starts, so the
// container's bind of dir sees it.
func mountSocketFS(dir string) error {
	mounted, err := isMountPoint(dir)
	if err != nil {
		return err
	}
	if mounted {
		return nil
	}
	return unix.Mount("sandgate-sock", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, socketFSOptions)
}

// unmountSocketFS detaches the tmpfs on dir, if any; a missing directory is fine.
func unmountSocketFS(dir string) error {
	mounted, err := isMountPoint(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !mounted {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

// isMountPoint says whether dir is on another filesystem than its parent.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("lstat %s: %w", filepath.Dir(dir), err)
	}
	return st.Dev != parent.Dev, nil
}
