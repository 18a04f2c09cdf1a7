package bayapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStorageFullAnswers507 runs the API on a store in a 4 MiB tmpfs and fills it: creating cargos (a store
// write each) ends in 507 storage_full, not a 500, and nothing else; listing them still answers every cargo
// written; once space returns the next create works, with no restart.
func TestStorageFullAnswers507(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs data dir needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { // registered first: runs after the API and its store are closed
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	a := newTestAPIAt(t, filepath.Join(dir, "api.db"))
	created := 0
	if st, out, _ := a.call(t, "POST", "/v1/cargos", keyAlice, map[string]any{"size_limit_mb": 256}); st != 201 {
		t.Fatalf("create before the disk filled: %d %v", st, out)
	}
	created++

	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 64<<10); ; {
		if _, err := filler.Write(chunk); err != nil {
			break // ENOSPC: full
		}
	}
	filler.Close()
	// A write may still land in pages bbolt freed before; within a few hundred one needs new space.
	for i := 0; ; i++ {
		st, out, _ := a.call(t, "POST", "/v1/cargos", keyAlice, map[string]any{"size_limit_mb": 256})
		if st == 201 {
			created++
			if i > 500 {
				t.Fatal("500 cargo creates fitted on a full disk")
			}
			continue
		}
		if st != 507 || errCode(out) != "storage_full" {
			t.Fatalf("create on a full disk: %d %v, want 507 storage_full", st, out)
		}
		break
	}
	st, list, _ := a.call(t, "GET", "/v1/cargos", keyAlice, nil)
	if items, _ := list["items"].([]any); st != 200 || len(items) != created {
		t.Fatalf("list on a full disk: %d, %d cargos, want %d", st, len(items), created)
	}
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if st, out, _ := a.call(t, "POST", "/v1/cargos", keyAlice, map[string]any{"size_limit_mb": 256}); st != 201 {
		t.Fatalf("create once space returned: %d %v", st, out)
	}
}
