package sandgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFuzzScriptRetriesOnlyTheDeadlineRace runs scripts/fuzz.sh, as shipped, in a scratch module whose `go` is a
// script replaying canned outputs of `go test -fuzz`: a failure that is only Go's coordinator deadline race is run
// again, a real finding fails at once, and a race that never clears still fails once the retries are spent.
func TestFuzzScriptRetriesOnlyTheDeadlineRace(t *testing.T) {
	const (
		pass     = "fuzz: elapsed: 10s, execs: 104628 (21395/sec)\nPASS\n"
		deadline = "fuzz: elapsed: 10s, execs: 104628 (0/sec)\n--- FAIL: FuzzThing (10.19s)\n    context deadline exceeded\nFAIL\n"
		finding  = "--- FAIL: FuzzThing (0.50s)\n    --- FAIL: FuzzThing (0.00s)\n        thing_test.go:9: boom\n\n" +
			"    Failing input written to testdata/fuzz/FuzzThing/1f2e\n    context deadline exceeded\nFAIL\n"
	)
	for _, tc := range []struct {
		name     string
		runs     []string // the outputs of successive runs; a run fails unless its output is pass
		wantRuns int
		wantOK   bool
	}{
		{"passes at once", []string{pass}, 1, true},
		{"deadline race then pass", []string{deadline, pass}, 2, true},
		{"race twice then pass", []string{deadline, deadline, pass}, 3, true},
		{"race never clears", []string{deadline, deadline, deadline, pass}, 3, false},
		{"a finding fails at once", []string{finding, pass}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script, err := os.ReadFile("scripts/fuzz.sh")
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "scripts/fuzz.sh"), string(script), 0o755)
			writeFile(t, filepath.Join(dir, "thing/thing_test.go"), "package thing\n\nfunc FuzzThing(f *testing.F) {}\n", 0o644)
			for i, out := range tc.runs {
				writeFile(t, filepath.Join(dir, "runs", string(rune('0'+i))), out, 0o644)
			}
			// The fake go prints the next canned output and succeeds only when it says PASS.
			fakeGo := `#!/bin/sh
n=$(cat "$RUNS/count" 2>/dev/null || echo 0)
echo $((n+1)) > "$RUNS/count"
cat "$RUNS/$n"
grep -q '^PASS$' "$RUNS/$n"
`
			writeFile(t, filepath.Join(dir, "fakego"), fakeGo, 0o755)
			if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
				t.Fatalf("git init: %v\n%s", err, out)
			}
			cmd := exec.Command(filepath.Join(dir, "scripts/fuzz.sh"), "1s")
			cmd.Env = append(os.Environ(), "GO="+filepath.Join(dir, "fakego"), "RUNS="+filepath.Join(dir, "runs"))
			out, err := cmd.CombinedOutput()
			if ok := err == nil; ok != tc.wantOK {
				t.Fatalf("fuzz.sh succeeded=%v, want %v\n%s", ok, tc.wantOK, out)
			}
			count, _ := os.ReadFile(filepath.Join(dir, "runs/count"))
			if got := strings.TrimSpace(string(count)); got != string(rune('0'+tc.wantRuns)) {
				t.Fatalf("go test ran %s times, want %d\n%s", got, tc.wantRuns, out)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
