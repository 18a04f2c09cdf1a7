package docker

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestCopyTree: contents, modes, times, symlinks (copied as links, never followed, even when they point at host
// secrets), hard links and fifos survive; sockets are skipped; the byte limit stops a copy with the typed error.
func TestCopyTree(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a/b"), 0o755))
	must(os.WriteFile(filepath.Join(src, "a/b/file"), []byte("hello"), 0o640))
	must(os.WriteFile(filepath.Join(src, "exe"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Symlink("/etc/shadow", filepath.Join(src, "evil")))
	must(os.Symlink("a/b/file", filepath.Join(src, "rel")))
	must(os.Link(filepath.Join(src, "a/b/file"), filepath.Join(src, "hard")))
	must(unix.Mkfifo(filepath.Join(src, "fifo"), 0o600))
	// A sparse file: 1 GiB apparent, two data extents; a socket and a device node, which are skipped.
	sparse, err := os.Create(filepath.Join(src, "sparse"))
	must(err)
	_, err = sparse.WriteAt([]byte("head"), 0)
	must(err)
	_, err = sparse.WriteAt([]byte("middle"), 512<<20)
	must(err)
	must(sparse.Truncate(1 << 30))
	must(sparse.Close())
	ln, err := net.Listen("unix", filepath.Join(src, "sock"))
	must(err)
	defer ln.Close()
	if err := unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Logf("no device node (not root?): %v", err)
	}
	must(os.Chmod(filepath.Join(src, "a"), 0o500)) // read-only directory: its children must still be copied
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(filepath.Join(src, "exe"), old, old))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(src, "a"), 0o755) })

	for _, openat2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat", true: "openat2"}[openat2], func(t *testing.T) { checkCopy(t, src, openat2, old) })
	}
	// The limit stops the copy with the typed error.
	if _, err := copyTree(context.Background(), src, t.TempDir(), 8); !errors.Is(err, sandboxes.ErrSnapshotTooLarge) {
		t.Errorf("copy over the limit: %v", err)
	}
	// A cancelled context stops it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := copyTree(ctx, src, t.TempDir(), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled copy: %v", err)
	}
}

// checkCopy copies TestCopyTree's src and checks the copy.
func checkCopy(t *testing.T, src string, openat2 bool, old time.Time) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dst := t.TempDir()
	stats, err := copyTreeWith(context.Background(), src, dst, 0, openat2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dst, "a"), 0o755) })
	if stats.Bytes != int64(len("hello")+len("#!/bin/sh\n"))+1<<30 || (stats.Method != sandboxes.CopyStreamed && stats.Method != sandboxes.CopyReflink) {
		t.Errorf("stats %+v", stats)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a/b/file")); err != nil || string(b) != "hello" {
		t.Errorf("file: %q %v", b, err)
	}
	for path, want := range map[string]os.FileMode{"a/b/file": 0o640, "exe": 0o755, "a": 0o500} {
		if fi, err := os.Stat(filepath.Join(dst, path)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s mode: %v %v, want %v", path, fi.Mode(), err, want)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dst, "exe")); !fi.ModTime().Equal(old) {
		t.Errorf("mtime %v, want %v", fi.ModTime(), old)
	}
	for name, want := range map[string]string{"evil": "/etc/shadow", "rel": "a/b/file"} {
		if l, err := os.Readlink(filepath.Join(dst, name)); err != nil || l != want {
			t.Errorf("symlink %s: %q %v", name, l, err)
		}
	}
	a, _ := os.Stat(filepath.Join(dst, "hard"))
	b, _ := os.Stat(filepath.Join(dst, "a/b/file"))
	if a.Sys().(*syscall.Stat_t).Ino != b.Sys().(*syscall.Stat_t).Ino {
		t.Error("hard link became two files")
	}
	if fi, err := os.Lstat(filepath.Join(dst, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo: %v %v", fi, err)
	}

	// The sparse file keeps its size, its data and its holes.
	fi, err := os.Stat(filepath.Join(dst, "sparse"))
	must(err)
	if fi.Size() != 1<<30 || fi.Sys().(*syscall.Stat_t).Blocks*512 > 1<<20 {
		t.Errorf("sparse copy: size %d, %d blocks allocated", fi.Size(), fi.Sys().(*syscall.Stat_t).Blocks)
	}
	f, err := os.Open(filepath.Join(dst, "sparse"))
	must(err)
	buf := make([]byte, 6)
	if _, err := f.ReadAt(buf, 512<<20); err != nil || string(buf) != "middle" {
		t.Errorf("sparse data: %q %v", buf, err)
	}
	if _, err := f.ReadAt(buf[:4], 0); err != nil || string(buf[:4]) != "head" {
		t.Errorf("sparse head: %q %v", buf[:4], err)
	}
	f.Close()
	for _, name := range []string{"sock", "null"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); !os.IsNotExist(err) {
			t.Errorf("%s was copied: %v", name, err)
		}
	}
	if stats.Skipped < 1 {
		t.Errorf("nothing skipped: %+v", stats)
	}
}
