package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// swapEntries exchanges a and b atomically (renameat2 RENAME_EXCHANGE) until stop is closed, as a tenant's code
// would while its workspace is copied.
func swapEntries(t *testing.T, stop <-chan struct{}, pairs ...[2]string) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := unix.Renameat2(unix.AT_FDCWD, p[0], unix.AT_FDCWD, p[1], unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("exchanging %s and %s: %v", p[0], p[1], err)
					return
				}
			}
		}()
	}
	return &wg
}

// TestCopyTreeSwapRace: while the tree is copied, a directory is exchanged with a symlink to a host directory,
// and a file with a symlink to a host file, as fast as the kernel allows. Over 200 copies no host file's content
// reaches a copy and nothing is created in the host directory: every copy either succeeds with the tenant's own
// entries or fails with errChanged. A walk by path (the old copyTree) read the host's canary into the copy and
// created files in the host directory through the swapped link.
func TestCopyTreeSwapRace(t *testing.T) {
	host := t.TempDir()
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	canary := []byte("host canary " + hex.EncodeToString(nonce) + "\n")
	if err := os.WriteFile(filepath.Join(host, "canary"), canary, 0o600); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(src, "d"), 0o755))
	for _, name := range []string{"planted", "canary", "more"} {
		must(os.WriteFile(filepath.Join(src, "d", name), []byte("tenant "+name+"\n"), 0o644))
	}
	must(os.Symlink(host, filepath.Join(src, "l")))
	must(os.WriteFile(filepath.Join(src, "r"), []byte("tenant file\n"), 0o644))
	must(os.Symlink(filepath.Join(host, "canary"), filepath.Join(src, "s")))

	stop := make(chan struct{})
	wg := swapEntries(t, stop,
		[2]string{filepath.Join(src, "d"), filepath.Join(src, "l")},
		[2]string{filepath.Join(src, "r"), filepath.Join(src, "s")})
	defer func() { close(stop); wg.Wait() }()

	out := t.TempDir()
	var ok, changed int
	for i := range 200 {
		dst := filepath.Join(out, "copy")
		must(os.Mkdir(dst, 0o755))
		_, err := copyTreeWith(context.Background(), src, dst, 0, i%2 == 0) // openat2, and openat alone
		switch {
		case err == nil:
			ok++
		case bytesContains(err.Error(), "changed during the copy"):
			changed++
		default:
			t.Errorf("copy %d: %v", i, err)
		}
		_ = filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, _ := os.ReadFile(path); bytes.Equal(b, canary) {
					t.Fatalf("copy %d: the host's canary was copied to %s", i, path)
				}
			}
			return nil
		})
		entries, err := os.ReadDir(host)
		if err != nil || len(entries) != 1 || entries[0].Name() != "canary" {
			t.Fatalf("copy %d: the host directory changed: %v %v", i, entries, err)
		}
		if b, err := os.ReadFile(filepath.Join(host, "canary")); err != nil || !bytes.Equal(b, canary) {
			t.Fatalf("copy %d: the host's canary changed: %q %v", i, b, err)
		}
		_ = makeWritable(dst)
		must(os.RemoveAll(dst))
	}
	t.Logf("200 copies under the swapper: %d whole, %d refused as changed", ok, changed)
}

func bytesContains(s, sub string) bool { return bytes.Contains([]byte(s), []byte(sub)) }

// makeWritable gives every directory under root its owner's write bit back, so RemoveAll can empty it.
func makeWritable(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
}

// TestCopyTreeMemoryBounded: the copy's heap does not grow with the number of directories. A workspace of many
// empty directories (the millions, here 60,000) is copied while the heap is sampled; the walk keeps a
// directory's metadata only while it is inside it, so the peak stays near the baseline. The copy that listed every
// directory until it finished peaked 29 MB above the baseline for these (about 1 MB now); the bound asserted is
// 7 MB.
func TestCopyTreeMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 60,000 directories")
	}
	src, dst := memTempDir(t), memTempDir(t)
	const n = 60000
	for i := range n {
		if err := os.Mkdir(filepath.Join(src, "d"+hex.EncodeToString([]byte{byte(i >> 16), byte(i >> 8), byte(i)})), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	stats, err := copyTree(context.Background(), src, dst, 0)
	close(done)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if stats.Dirs != n+1 {
		t.Fatalf("copied %d directories, want %d", stats.Dirs, n+1)
	}
	grew := int64(peak) - int64(base.HeapAlloc)
	t.Logf("%d empty directories: heap peak %d KiB above the baseline", n, grew>>10)
	if grew > 7<<20 {
		t.Errorf("the heap grew by %d KiB while copying %d empty directories", grew>>10, n)
	}
}

// memTempDir is a temporary directory on tmpfs where the host has one (/dev/shm): the memory test measures the
// walk's heap, and 60,000 directories on a shared machine's disk take minutes.
func memTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "copytree-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestCopyTreeDepthAndLinks: a tree nested to the depth limit is copied and one level deeper is refused (the walk
// holds two descriptors per level); a file with three links, two of them in other directories, stays one inode.
func TestCopyTreeDepthAndLinks(t *testing.T) {
	for _, tc := range []struct {
		depth int
		ok    bool
	}{{maxCopyDepth, true}, {maxCopyDepth + 1, false}} {
		src := memTempDir(t)
		parts := make([]string, tc.depth)
		for i := range parts {
			parts[i] = "n"
		}
		if err := os.MkdirAll(filepath.Join(src, filepath.Join(parts...)), 0o755); err != nil {
			t.Fatal(err)
		}
		stats, err := copyTree(context.Background(), src, memTempDir(t), 0)
		if tc.ok && (err != nil || stats.Dirs != int64(tc.depth)+1) {
			t.Errorf("depth %d: %v, %d directories", tc.depth, err, stats.Dirs)
		}
		if !tc.ok && (err == nil || !bytesContains(err.Error(), "deeper than")) {
			t.Errorf("depth %d: %v, want refused", tc.depth, err)
		}
	}

	src, dst := memTempDir(t), memTempDir(t)
	for _, d := range []string{"a", "b/c"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "a/one"), []byte("linked"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"b/c/two", "three"} {
		if err := os.Link(filepath.Join(src, "a/one"), filepath.Join(src, l)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := copyTree(context.Background(), src, dst, 0); err != nil {
		t.Fatal(err)
	}
	var first unix.Stat_t
	if err := unix.Lstat(filepath.Join(dst, "a/one"), &first); err != nil || first.Nlink != 3 {
		t.Fatalf("a/one: %d links, %v", first.Nlink, err)
	}
	for _, l := range []string{"b/c/two", "three"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dst, l), &st); err != nil || st.Ino != first.Ino {
			t.Errorf("%s is not a link to a/one: %v", l, err)
		}
	}
}
