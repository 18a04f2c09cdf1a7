package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// NodeModules makes sure the repository's npm dependencies (package-lock.json: playwright-core, ws, the page
// assets) are installed and returns the node_modules directory. Node scripts run by tests should set
// NODE_PATH to it. Chromium for Playwright is Debian's, at /usr/bin/chromium (installed by prereqs when missing).
func NodeModules(t testing.TB) string {
	t.Helper()
	Integration(t)
	if err := nodeDeps(); err != nil {
		t.Fatalf("node dependencies: %v", err)
	}
	return filepath.Join(RepoRoot(), "node_modules")
}

// chromiumNS builds internal/testing/chromiumns once per test process into build/test-chromiumns.
var chromiumNS = sync.OnceValues(func() (string, error) {
	return buildBinary(RepoRoot(), "./internal/testing/chromiumns", "test-chromiumns")
})

var nodeDeps = sync.OnceValue(func() error {
	if err := runScript("prereqs.sh", "node", "chromium"); err != nil {
		return err
	}
	return runScript("npm-deps.sh")
})

// RunNode runs a Node script with NODE_PATH set to the repository's node_modules and returns its combined output.
// SANDGATE_CHROMIUM names the browser scripts launch (testdata/chromium.cjs): Chromium in a network namespace of its
// own (internal/testing/chromiumns).
func RunNode(t testing.TB, script string, env ...string) (string, error) {
	t.Helper()
	mods := NodeModules(t)
	browser, err := chromiumNS()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+mods, "SANDGATE_CHROMIUM="+browser), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
