package caddymodule_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandgate/sandgate/internal/testenv"
)

// edgeImageRepo is where the edge tests build the sandbox images: the shared sandgate/sandbox tags are rebuilt by
// every branch's tests from its own agent, so a test that needs this branch's agent builds under its own name.
const edgeImageRepo = "sandgate-edge/sandbox"

var (
	edgeImageMu    sync.Mutex
	edgeImageReady = map[string]bool{}
)

// edgeImage builds (once per process; a no-op when current) and returns this branch's image for target.
func edgeImage(t *testing.T, target string) string {
	t.Helper()
	testenv.Integration(t)
	edgeImageMu.Lock()
	defer edgeImageMu.Unlock()
	if !edgeImageReady[target] {
		cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "images.sh"), target)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "SANDGATE_IMAGE_REPO="+edgeImageRepo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s:%s: %v\n%s", edgeImageRepo, target, err, out)
		}
		edgeImageReady[target] = true
	}
	return edgeImageRepo + ":" + target
}
