package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	nodeOnce sync.Once
	nodeErr  error
)

// NodeModules makes sure the repository's npm dependencies (package-lock.json: playwright-core, ws, the page
// assets) are installed and returns the node_modules directory. Node scripts run by tests should set
// NODE_PATH to it. Chromium for Playwright is Debian's, at /usr/bin/chromium (installed by prereqs when missing).
func NodeModules(t testing.TB) string {
	t.Helper()
	Integration(t)
	nodeOnce.Do(func() {
		if nodeErr = runScript("prereqs.sh", "node", "chromium"); nodeErr != nil {
			return
		}
		nodeErr = runScript("npm-deps.sh")
	})
	if nodeErr != nil {
		t.Fatalf("node dependencies: %v", nodeErr)
	}
	return filepath.Join(RepoRoot(), "node_modules")
}

// RunNode runs a Node script with NODE_PATH set to the repository's node_modules and returns its combined output.
func RunNode(t testing.TB, script string, env ...string) (string, error) {
	t.Helper()
	mods := NodeModules(t)
	cmd := exec.Command("node", script)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+mods), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
