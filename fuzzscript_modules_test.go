package sandgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFuzzScriptFindsNestedModules runs scripts/fuzz.sh, as shipped, in a scratch repository with a nested Go module
// (as kubernetes/ is): each target's go test runs in the module that holds it, with the package path relative to
// that module, so a fuzz target of the Kubernetes module is run rather than refused as outside the main module.
func TestFuzzScriptFindsNestedModules(t *testing.T) {
	dir := t.TempDir()
	script, err := os.ReadFile("scripts/fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "scripts/fuzz.sh"), string(script), 0o755)
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/top\n", 0o644)
	writeFile(t, filepath.Join(dir, "top_test.go"), "package top\n\nfunc FuzzTop(f *testing.F) {}\n", 0o644)
	writeFile(t, filepath.Join(dir, "thing/thing_test.go"), "package thing\n\nfunc FuzzThing(f *testing.F) {}\n", 0o644)
	writeFile(t, filepath.Join(dir, "nested/go.mod"), "module example.com/top/nested\n", 0o644)
	writeFile(t, filepath.Join(dir, "nested/deep/names/names_test.go"), "package names\n\nfunc FuzzNames(f *testing.F) {}\n", 0o644)
	// The fake go records its arguments, one run a line, and passes.
	record := filepath.Join(dir, "runs")
	writeFile(t, filepath.Join(dir, "fakego"), "#!/bin/sh\necho \"$*\" >> "+record+"\necho PASS\n", 0o755)
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(dir, "scripts/fuzz.sh"), "1s")
	cmd.Env = append(os.Environ(), "GO="+filepath.Join(dir, "fakego"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fuzz.sh: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	runs := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for _, want := range []struct{ module, target, pkg string }{
		{".", "FuzzTop", "."},
		{".", "FuzzThing", "./thing"},
		{"nested", "FuzzNames", "./deep/names"},
	} {
		found := false
		for _, r := range runs {
			f := strings.Fields(r)
			if len(f) > 3 && f[0] == "-C" && f[1] == want.module && f[2] == "test" && strings.Contains(r, "^"+want.target+"$") && f[len(f)-1] == want.pkg {
				found = true
			}
		}
		if !found {
			t.Errorf("no run of %s as %s in module %s; runs:\n%s", want.target, want.pkg, want.module, raw)
		}
	}
	if len(runs) != 3 {
		t.Errorf("%d runs, want 3:\n%s", len(runs), raw)
	}
}
