package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/sandboxes"
)

// The copy of a workspace runs as root on the engine host, over a tree its tenant wrote (and, were the tenant's
// code still running, could be rewriting: a rename, or renameat2(RENAME_EXCHANGE) of a directory and a symlink to
// the host, between two steps of the walk). So it never names anything by a path: every step is relative to a
// directory descriptor the walk already holds, one name at a time, and no step follows a symlink.
//
//   - A source entry is opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
//     RESOLVE_NO_XDEV) where the kernel has it (5.6+), else openat(O_NOFOLLOW). A name comes from getdents, so it
//     is one component and never "." or "..": either way a symlink is refused, not followed, and what opens is
//     below the directory it was read from. A tenant cannot move a directory out of its volume (a rename across
//     mounts is EXDEV), so every descriptor the walk holds stays inside the source volume.
//   - What was opened is what is copied: its type and metadata come from fstat of the descriptor, and a file
//     swapped for something else between the listing and the open fails the copy (errChanged), never the gateway.
//   - The destination is created with mkdirat/openat(O_CREAT|O_EXCL|O_NOFOLLOW)/symlinkat relative to directory
//     descriptors of the new volume, and owners, modes and times are set through descriptors (fchown, fchmod,
//     futimens), or with AT_SYMLINK_NOFOLLOW for a link. The new volume is mounted nowhere during the copy.
//
// The Manager also freezes the source's container whenever it runs (sandboxes.Manager.mustFreeze), so normally
// nothing changes under the walk at all; the walk is safe without that freeze too (TestCopyTreeSwapRace).
// Copying inside a throwaway container that sees only the two volumes, or as an unprivileged user, would add a
// second wall; it is not done: keeping owners needs CAP_CHOWN and CAP_FOWNER (and reading a tenant's 000 files
// CAP_DAC_READ_SEARCH) anyway, and a container per copy would add a container start to every snapshot and fork.
//
// Memory is bounded by the tree's depth, not its size: a directory's metadata is applied when the walk leaves it
// (post-order), names are read in getdents batches, and only files with more than one link are remembered, each
// until its last link was copied.

// maxCopyDepth bounds how deep a copied tree may nest: the walk holds two descriptors per level, so a tenant's
// million nested directories must not cost a million descriptors. The copy by path this walk replaced failed
// anyway past PATH_MAX (4096 bytes, about 2048 levels of one-letter names).
const maxCopyDepth = 1024

// errChanged: an entry vanished or changed type between its listing and its open. Only a tree being written
// during the copy does that, which the Manager's freeze rules out; the copy fails rather than guess.
var errChanged = errors.New("changed during the copy")

// copyTree copies the tree under src into the existing directory dst, keeping modes, owners, times, symlinks
// and hard links. src is tenant content: nothing in it is followed (symlinks are copied as links, and see above),
// and dst is a directory only the gateway writes. Files are cloned with FICLONE where the filesystem shares
// extents (XFS, btrfs), else streamed with copy_file_range. limit > 0 stops the copy with
// sandboxes.ErrSnapshotTooLarge once more bytes than that would be written. Sockets and device nodes are skipped:
// they cannot be carried over, and a sandbox cannot make device nodes.
func copyTree(ctx context.Context, src, dst string, limit int64) (sandboxes.CopyStats, error) {
	return copyTreeWith(ctx, src, dst, limit, true)
}

// copyTreeWith is copyTree; tryOpenat2 false walks with openat(O_NOFOLLOW) even where the kernel has openat2, as
// on kernels before 5.6 (the tests run both).
func copyTreeWith(ctx context.Context, src, dst string, limit int64, tryOpenat2 bool) (sandboxes.CopyStats, error) {
	c := &treeCopier{ctx: ctx, limit: limit, links: map[fileKey]linked{}, reflink: true, dirents: make([]byte, 32<<10)}
	began := time.Now()
	// The two roots are the engine's mountpoints, which the gateway looked up; neither may be a symlink.
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return c.stats, fmt.Errorf("opening %s: %w", src, err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return c.stats, fmt.Errorf("opening %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	c.dstRoot = dfd
	c.openat2 = tryOpenat2 && probeOpenat2(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return c.stats, fmt.Errorf("reading %s: %w", src, err)
	}
	c.stats.Dirs++
	if err := c.dir(sfd, dfd, "", 0); err != nil {
		return c.stats, err
	}
	if err := fdMeta(dfd, &st); err != nil {
		return c.stats, fmt.Errorf("setting the metadata of the copy's root: %w", err)
	}
	c.stats.Method = sandboxes.CopyStreamed
	if c.cloned > 0 && c.streamed == 0 {
		c.stats.Method = sandboxes.CopyReflink
	}
	c.stats.Duration = time.Since(began)
	return c.stats, nil
}

type fileKey struct{ dev, ino uint64 }

// linked is the first copy of a file with more than one link: where it is in dst, and how many of its links are
// still to come (it is forgotten after the last).
type linked struct {
	path string
	left uint64
}

type treeCopier struct {
	ctx              context.Context
	limit            int64
	dstRoot          int
	openat2          bool
	links            map[fileKey]linked
	dirents          []byte // getdents buffer, shared by every level: a level parses its batch before descending
	reflink          bool   // false once the filesystem refused a clone
	cloned, streamed int
	stats            sandboxes.CopyStats
}

// dir copies the entries of the source directory sfd into dfd. rel is sfd's path below the root, for messages
// and hard links.
func (c *treeCopier) dir(sfd, dfd int, rel string, depth int) error {
	for {
		n, err := unix.Getdents(sfd, c.dirents)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", show(rel), err)
		}
		if n == 0 {
			return nil
		}
		_, _, names := unix.ParseDirent(c.dirents[:n], -1, nil)
		for _, name := range names {
			if err := c.entry(sfd, dfd, rel, name, depth); err != nil {
				return err
			}
		}
	}
}

func (c *treeCopier) entry(sfd, dfd int, rel, name string, depth int) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	path := name
	if rel != "" {
		path = rel + "/" + name
	}
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("%s: a name getdents cannot return", show(path))
	}
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			err = fmt.Errorf("%w: %w", errChanged, err) // listed a moment ago
		}
		return &copyError{path: path, err: err}
	}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		err = c.subdir(sfd, dfd, path, name, depth+1)
	case unix.S_IFREG:
		err = c.file(sfd, dfd, path, name, &st)
	case unix.S_IFLNK:
		err = c.symlink(sfd, dfd, name, &st)
	case unix.S_IFIFO:
		err = c.fifo(dfd, name, &st)
	default:
		c.stats.Skipped++
	}
	var already *copyError
	if err != nil && !errors.As(err, &already) && !errors.Is(err, sandboxes.ErrSnapshotTooLarge) && c.ctx.Err() == nil {
		return &copyError{path: path, err: err}
	}
	return err
}

// copyError says which entry a copy failed on (once: the innermost).
type copyError struct {
	path string
	err  error
}

func (e *copyError) Error() string { return fmt.Sprintf("copying %s: %v", e.path, e.err) }
func (e *copyError) Unwrap() error { return e.err }

func (c *treeCopier) subdir(sfd, dfd int, path, name string, depth int) error {
	if depth > maxCopyDepth {
		return fmt.Errorf("directories nest deeper than %d levels", maxCopyDepth)
	}
	in, err := c.openSource(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return changedIf(err)
	}
	defer unix.Close(in)
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil {
		return err
	}
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return err
	}
	out, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(out)
	c.stats.Dirs++
	if err := c.dir(in, out, path, depth); err != nil {
		return err
	}
	// Modes and times on the way out: writing the children changed the directory's times, and a read-only
	// directory would have refused them.
	return fdMeta(out, &st)
}

func (c *treeCopier) file(sfd, dfd int, path, name string, lst *unix.Stat_t) error {
	if lst.Nlink > 1 {
		key := fileKey{uint64(lst.Dev), uint64(lst.Ino)}
		if first, ok := c.links[key]; ok {
			if err := c.link(first.path, dfd, name); err != nil {
				return err
			}
			if first.left <= 1 {
				delete(c.links, key)
			} else {
				first.left--
				c.links[key] = first
			}
			c.stats.Files++
			return nil
		}
	}
	if c.limit > 0 && c.stats.Bytes+lst.Size > c.limit {
		return fmt.Errorf("%w: more than %d bytes", sandboxes.ErrSnapshotTooLarge, c.limit)
	}
	// O_NONBLOCK and O_NOCTTY: whatever is at the name now is opened without blocking or side effects, and
	// refused below unless it is a regular file.
	fd, err := c.openSource(sfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return changedIf(err)
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = errChanged
	}
	if err == nil {
		err = unix.SetNonblock(fd, false)
	}
	if err != nil {
		unix.Close(fd)
		return err
	}
	in := os.NewFile(uintptr(fd), path)
	defer in.Close()
	ofd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(ofd), path)
	n, err := c.content(in, out, st.Size)
	if err == nil && c.limit > 0 && c.stats.Bytes+n > c.limit {
		err = fmt.Errorf("%w: more than %d bytes", sandboxes.ErrSnapshotTooLarge, c.limit)
	}
	if err == nil {
		err = fdMeta(ofd, &st)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	c.stats.Bytes += n
	c.stats.Files++
	if st.Nlink > 1 {
		// Remembered by what was opened and copied, until its last link is made.
		c.links[fileKey{uint64(st.Dev), uint64(st.Ino)}] = linked{path: path, left: uint64(st.Nlink) - 1}
	}
	return nil
}

// link makes name in dfd another link to the copy at first (a path below dst's root, made by this walk). The
// directory holding it is reached one component at a time, never through a symlink.
func (c *treeCopier) link(first string, dfd int, name string) error {
	dir, base := "", first
	if i := strings.LastIndexByte(first, '/'); i >= 0 {
		dir, base = first[:i], first[i+1:]
	}
	pfd, err := c.openBelow(c.dstRoot, dir)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Linkat(pfd, base, dfd, name, 0)
}

func (c *treeCopier) symlink(sfd, dfd int, name string, st *unix.Stat_t) error {
	buf := make([]byte, unix.PathMax+1)
	n, err := unix.Readlinkat(sfd, name, buf)
	if errors.Is(err, unix.EINVAL) {
		return errChanged // no longer a symlink
	}
	if err != nil {
		return err
	}
	if n > unix.PathMax {
		return fmt.Errorf("a symlink's target longer than %d bytes", unix.PathMax)
	}
	if err := unix.Symlinkat(string(buf[:n]), dfd, name); err != nil {
		return err
	}
	c.stats.Files++
	if err := unix.Fchownat(dfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return unix.UtimesNanoAt(dfd, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

func (c *treeCopier) fifo(dfd int, name string, st *unix.Stat_t) error {
	if err := unix.Mkfifoat(dfd, name, 0o600); err != nil {
		return err
	}
	// The fifo just made in the new volume, opened to set its metadata through a descriptor: a reader's open of
	// a fifo with O_NONBLOCK returns at once.
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	c.stats.Files++
	return fdMeta(fd, st)
}

// openSource opens name, one component, in the source directory dirfd without following a symlink.
func (c *treeCopier) openSource(dirfd int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !c.openat2 {
		return retryEINTR(func() (int, error) { return unix.Openat(dirfd, name, flags, 0) })
	}
	how := &unix.OpenHow{Flags: uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, name, how)
		// EAGAIN: the kernel could not rule out an escape during a concurrent rename; it is worth asking again.
		if (errors.Is(err, unix.EAGAIN) && i < 8) || errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// openBelow opens the directory rel (a path this walk made, "" for root itself) below root, one component at a
// time and never through a symlink.
func (c *treeCopier) openBelow(root int, rel string) (int, error) {
	fd, err := unix.Dup(root)
	if err != nil || rel == "" {
		return fd, err
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := c.openSource(fd, part, unix.O_PATH|unix.O_DIRECTORY)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// probeOpenat2 says whether the kernel (and any seccomp filter around the gateway) allows openat2.
func probeOpenat2(dirfd int) bool {
	fd, err := unix.Openat2(dirfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

func retryEINTR(op func() (int, error)) (int, error) {
	for {
		fd, err := op()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// changedIf turns the refusal of a symlink (ELOOP), or of a non-directory opened as one (ENOTDIR), into
// errChanged: the listing said otherwise a moment before.
func changedIf(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%w: %w", errChanged, err)
	}
	return err
}

// fdMeta copies owner, permission bits (with setuid, setgid, sticky) and times of st onto the open file fd. The
// owner goes first: a chown clears the setuid and setgid bits.
func fdMeta(fd int, st *unix.Stat_t) error {
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return err
	}
	return futimens(fd, [2]unix.Timespec{st.Atim, st.Mtim})
}

// futimens sets fd's access and modification times (utimensat with a NULL path acts on fd itself; x/sys/unix
// has no wrapper that passes NULL).
func futimens(fd int, ts [2]unix.Timespec) error {
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// show names a path below the copy's root in messages.
func show(rel string) string {
	if rel == "" {
		return "the workspace's root"
	}
	return rel
}
