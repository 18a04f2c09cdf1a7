package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/sandboxes"
)

// copyTree copies the tree under src into the existing directory dst, keeping modes, owners, times, symlinks
// and hard links. src is tenant content: nothing in it is followed (symlinks are copied as links, files are
// opened O_NOFOLLOW), and dst is a directory only the gateway writes. Files are cloned with FICLONE where the
// filesystem shares extents (XFS, btrfs), else streamed with copy_file_range. limit > 0 stops the copy with
// sandboxes.ErrSnapshotTooLarge once more bytes than that would be written. Sockets and device nodes are skipped:
// they cannot be carried over, and a sandbox cannot make device nodes.
func copyTree(ctx context.Context, src, dst string, limit int64) (sandboxes.CopyStats, error) {
	c := &treeCopier{ctx: ctx, src: src, dst: dst, limit: limit, links: map[fileKey]string{}, reflink: true}
	began := time.Now()
	type dirMeta struct {
		path string
		info fs.FileInfo
	}
	var dirs []dirMeta
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if rel != "." {
				if err := os.Mkdir(target, 0o700); err != nil {
					return err
				}
			}
			dirs = append(dirs, dirMeta{target, info})
			c.stats.Dirs++
			return nil
		case mode.IsRegular():
			return c.file(path, target, info)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			c.stats.Files++
			return c.meta(target, info, true)
		case mode&fs.ModeNamedPipe != 0:
			if err := unix.Mkfifo(target, uint32(mode.Perm())); err != nil {
				return err
			}
			c.stats.Files++
			return c.meta(target, info, false)
		default:
			c.stats.Skipped++
			return nil
		}
	})
	if err != nil {
		return c.stats, err
	}
	// Directory modes and times last: writing their children changed their times, and a read-only directory
	// would have refused its children.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := c.meta(dirs[i].path, dirs[i].info, false); err != nil {
			return c.stats, err
		}
	}
	c.stats.Method = sandboxes.CopyStreamed
	if c.cloned > 0 && c.streamed == 0 {
		c.stats.Method = sandboxes.CopyReflink
	}
	c.stats.Duration = time.Since(began)
	return c.stats, nil
}

type fileKey struct{ dev, ino uint64 }

type treeCopier struct {
	ctx              context.Context
	src, dst         string
	limit            int64
	links            map[fileKey]string
	reflink          bool // false once the filesystem refused a clone
	cloned, streamed int
	stats            sandboxes.CopyStats
}

func (c *treeCopier) file(path, target string, info fs.FileInfo) error {
	st, _ := info.Sys().(*syscall.Stat_t)
	if st != nil && st.Nlink > 1 {
		key := fileKey{uint64(st.Dev), st.Ino}
		if first, ok := c.links[key]; ok {
			c.stats.Files++
			return os.Link(first, target)
		}
		c.links[key] = target
	}
	if c.limit > 0 && c.stats.Bytes+info.Size() > c.limit {
		return fmt.Errorf("%w: more than %d bytes", sandboxes.ErrSnapshotTooLarge, c.limit)
	}
	in, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := c.content(in, out, info.Size())
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if c.limit > 0 && c.stats.Bytes+n > c.limit {
		return fmt.Errorf("%w: more than %d bytes", sandboxes.ErrSnapshotTooLarge, c.limit)
	}
	c.stats.Bytes += n
	c.stats.Files++
	return c.meta(target, info, false)
}

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

// meta copies owner, permission bits and times of info onto path.
func (c *treeCopier) meta(path string, info fs.FileInfo, symlink bool) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if ok {
		if err := os.Lchown(path, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if !symlink {
		mode := info.Mode().Perm() | info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
	}
	if ok {
		ts := []unix.Timespec{unix.NsecToTimespec(syscall.TimespecToNsec(st.Atim)), unix.NsecToTimespec(syscall.TimespecToNsec(st.Mtim))}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}
