package entrypoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSeedHome copies directories, files (with their modes) and symlinks, skips what cannot be read, and treats a
// missing seed as nothing to do.
func TestSeedHome(t *testing.T) {
	seed, home := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(seed, ".config", "app"), 0o755))
	must(os.WriteFile(filepath.Join(seed, "entrypoint.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(filepath.Join(seed, ".config", "app", "conf"), []byte("x=1"), 0o600))
	must(os.Symlink("entrypoint.sh", filepath.Join(seed, "run")))
	n, err := SeedHome(seed, home)
	if err != nil || n != 5 {
		t.Fatalf("seeded %d: %v", n, err)
	}
	if fi, err := os.Stat(filepath.Join(home, "entrypoint.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("entrypoint.sh: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".config", "app", "conf")); err != nil || string(b) != "x=1" {
		t.Errorf("nested file: %q %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(home, "run")); err != nil || l != "entrypoint.sh" {
		t.Errorf("symlink: %q %v", l, err)
	}
	if n, err := SeedHome(filepath.Join(seed, "absent"), home); n != 0 || err != nil {
		t.Errorf("a missing seed: %d %v", n, err)
	}
	if os.Geteuid() != 0 { // root reads everything
		must(os.WriteFile(filepath.Join(seed, "secret"), []byte("s"), 0o000))
		_, err := SeedHome(seed, t.TempDir())
		var sk *SkippedError
		if !errors.As(err, &sk) || len(sk.Paths) != 1 {
			t.Errorf("an unreadable file: %v", err)
		}
	}
}
