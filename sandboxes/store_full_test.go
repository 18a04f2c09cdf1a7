package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// smallDataDir mounts a tmpfs of size (e.g. "4m") on a new directory, unmounted when t ends. It needs root.
func smallDataDir(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs data dir needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	// Registered first, so it runs last: after the Manager and its store are closed.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file into dir until the filesystem is full, and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; ; i++ {
		if _, err := f.Write(chunk); err != nil {
			if !isNoSpace(err) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
		if i > 1<<14 {
			t.Fatalf("%s never filled up", dir)
		}
	}
}

func wantStorageFull(t *testing.T, doing string, err error) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) || se.Code != CodeStorageFull {
		t.Fatalf("%s on a full data disk: %v, want %s", doing, err, CodeStorageFull)
	}
}

// TestStorageFullRefusesWritesAndRecovers runs a Manager on a store in a 4 MiB tmpfs and fills the filesystem:
// a create is refused with storage_full before it makes anything, store writes fail with storage_full (bbolt rolls
// the commit back), reads keep working; once the filler is removed the next create and write work with no
// restart, and the file reopens consistent (checkStoreFile) with every record written before, during and after.
func TestStorageFullRefusesWritesAndRecovers(t *testing.T) {
	dir := smallDataDir(t, "4m")
	path := filepath.Join(dir, "sandgate.db")
	st := NewBoltStore(path)
	d := newFakeDriver(t)
	m := startManagerOn(t, d, st, Config{Profiles: []Profile{testProfile("p")}})
	ctx := context.Background()
	before, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	containers, _ := d.count()

	filler := fill(t, dir)
	_, err = m.Create(ctx, CreateRequest{Profile: "p", Owner: "alice"})
	wantStorageFull(t, "create", err)
	if n, _ := d.count(); n != containers {
		t.Fatalf("the refused create made a container: %d, was %d", n, containers)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("the error does not name the data dir: %v", err)
	}
	// Store writes until one meets the full disk (the first may land in pages bbolt freed earlier): that one is
	// storage_full, and the writes before it stay.
	pad := strings.Repeat("k", 8<<10)
	written := 0
	for ; ; written++ {
		err := st.PutKey(StoredKey{Hash: fmt.Sprintf("h%04d", written), Owner: pad, Active: true})
		if err != nil {
			wantStorageFull(t, "a key write", err)
			break
		}
		if written > 2000 {
			t.Fatal("4 MiB took 2000 writes of 8 KiB")
		}
	}
	t.Logf("%d key writes of 8 KiB landed before the full disk refused one", written)
	// Reads keep working.
	if got, err := m.Get(ctx, before.ID); err != nil || got.ID != before.ID {
		t.Fatalf("get on a full disk: %v", err)
	}
	if list, _, err := m.List(ctx, ListOptions{}); err != nil || len(list) != 1 {
		t.Fatalf("list on a full disk: %d, %v", len(list), err)
	}
	if keys, err := st.ActiveKeys(); err != nil || len(keys) != written {
		t.Fatalf("keys on a full disk: %d, %v; want %d", len(keys), err, written)
	}

	// Space returns: the next create and write work, with no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "alice"})
	if err != nil {
		t.Fatalf("create once space returned: %v", err)
	}
	if err := st.PutKey(StoredKey{Hash: "h-after", Active: true}); err != nil {
		t.Fatalf("write once space returned: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := checkStoreFile(path); err != nil {
		t.Fatalf("the store is damaged after the full disk: %v", err)
	}
	ids := loadIDs(t, path)
	if !ids[before.ID] || !ids[after.ID] || len(ids) != 2 {
		t.Fatalf("records after reopening: %v, want %s and %s", ids, before.ID, after.ID)
	}
	re := NewBoltStore(path)
	defer re.Close()
	if keys, err := re.ActiveKeys(); err != nil || len(keys) != written+1 {
		t.Fatalf("keys after reopening: %d, %v; want %d", len(keys), err, written+1)
	}
}
