//go:build !linux

package sandboxes

import "errors"

// DiskSpace is not measured off Linux: the reserve check and the disk warnings are skipped there.
func DiskSpace(path string) (free, total uint64, err error) {
	return 0, 0, errors.New("disk space is measured on Linux only")
}
