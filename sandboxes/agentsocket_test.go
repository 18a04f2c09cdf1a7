package sandboxes

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func socketTestManager(t *testing.T, dir string) *Manager {
	t.Helper()
	m, err := NewManager(ManagerConfig{Namespace: "unit", SocketDir: dir}, newFakeDriver(t), NewBoltStore(filepath.Join(t.TempDir(), "store.db")), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSocketDirLifecycle(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sockets")
	m := socketTestManager(t, root)
	addr, err := m.prepareSocketDir("sandbox-0123abcd")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sandbox-0123abcd")
	if want := "unix/" + filepath.Join(dir, AgentSocketName); addr != want {
		t.Fatalf("addr %q, want %q", addr, want)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("socket directory: %v %v", fi, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != sandboxUID {
		t.Fatalf("socket directory owner: %+v", fi.Sys())
	}
	// The directory is a tmpfs of its own: what the sandbox writes there is bounded, whoever writes it.
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(dir, &sfs); err != nil || sfs.Type != 0x01021994 {
		t.Fatalf("socket directory is not a tmpfs: type %#x %v", sfs.Type, err)
	}
	err = os.WriteFile(filepath.Join(dir, "fill"), make([]byte, 1<<20), 0o600)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing 1 MiB into the socket directory: %v, want ENOSPC", err)
	}
	os.Remove(filepath.Join(dir, "fill"))
	if _, err := m.prepareSocketDir("sandbox-0123abcd"); err != nil {
		t.Fatalf("second prepare (a relaunch): %v", err)
	}
	if err := syscall.Statfs(dir, &sfs); err != nil || sfs.Type != 0x01021994 {
		t.Fatalf("after a relaunch: type %#x %v", sfs.Type, err)
	}
	if err := m.removeSocketDir("sandbox-0123abcd"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after remove: %v", err)
	}
	if err := m.removeSocketDir("sandbox-0123abcd"); err != nil {
		t.Fatalf("removing a missing directory: %v", err)
	}
}

func TestSocketDirRefusals(t *testing.T) {
	root := t.TempDir()
	m := socketTestManager(t, root)
	for _, id := range []string{"..", "../etc", "a/b", ""} {
		if err := m.removeSocketDir(id); err == nil {
			t.Errorf("removeSocketDir(%q) accepted", id)
		}
		if _, err := m.prepareSocketDir(id); err == nil {
			t.Errorf("prepareSocketDir(%q) accepted", id)
		}
	}
	long := socketTestManager(t, "/"+strings.Repeat("d", 100))
	if _, err := long.prepareSocketDir("sandbox-0123abcd"); ErrorCode(err) != CodeInvalid || !strings.Contains(err.Error(), "107") {
		t.Fatalf("over-long socket path: %v", err)
	}
	if _, err := NewManager(ManagerConfig{SocketDir: "relative"}, newFakeDriver(t), NewBoltStore(filepath.Join(t.TempDir(), "s.db")), nil); err == nil {
		t.Fatal("a relative socket directory was accepted")
	}
}
