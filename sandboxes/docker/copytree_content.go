package docker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// content clones in into out where the filesystem can, else copies the bytes (copy_file_range through ReadFrom).
func (c *treeCopier) content(in, out *os.File, size int64) (int64, error) {
	if c.reflink && size > 0 {
		err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
		if err == nil {
			c.cloned++
			return size, nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EINVAL) &&
			!errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return 0, fmt.Errorf("cloning %s: %w", in.Name(), err)
		}
		c.reflink = false
	}
	if size > 0 {
		c.streamed++
	}
	if st, ok := fileStat(in); ok && st.Blocks*512 < size {
		return copySparse(in, out, size)
	}
	return io.Copy(out, in)
}

func fileStat(f *os.File) (*syscall.Stat_t, bool) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

// copySparse copies only the data extents of in (SEEK_DATA/SEEK_HOLE) and leaves its holes holes: a tenant's
// `truncate -s 1T` costs no disk in its workspace, and must cost none in the copy either (a streamed copy would
// write a terabyte of zeros onto the engine's disk). Returns the apparent size copied.
func copySparse(in, out *os.File, size int64) (int64, error) {
	inFd, outFd := int(in.Fd()), int(out.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(inFd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return 0, fmt.Errorf("finding data in %s: %w", in.Name(), err)
		}
		hole, err := unix.Seek(inFd, data, unix.SEEK_HOLE)
		if err != nil {
			return 0, fmt.Errorf("finding a hole in %s: %w", in.Name(), err)
		}
		hole = min(hole, size) // a file growing under the copy is copied as it was when stat'ed
		for src, dst := data, data; src < hole; {
			n, err := unix.CopyFileRange(inFd, &src, outFd, &dst, int(min(hole-src, 1<<30)), 0)
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
				// No in-kernel copy between these two: the same extent through user space.
				w, err := io.Copy(io.NewOffsetWriter(out, dst), io.NewSectionReader(in, src, hole-src))
				src, dst = src+w, dst+w
				if err != nil {
					return 0, fmt.Errorf("copying %s: %w", in.Name(), err)
				}
				if w == 0 {
					break
				}
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("copying %s: %w", in.Name(), err)
			}
			if n == 0 {
				break // the file shrank
			}
		}
		off = hole
	}
	if err := out.Truncate(size); err != nil {
		return 0, fmt.Errorf("sizing %s: %w", out.Name(), err)
	}
	return size, nil
}
