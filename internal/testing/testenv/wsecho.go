package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// StartWSEcho builds bench/internal/wsecho (a static WebSocket echo server), streams it into the running
// container's /tmp and starts it there on port, detached, with any further flags (e.g. "-root", dir). Callers wait
// for it to answer in their own terms.
func StartWSEcho(t testing.TB, container, port string, flags ...string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wsecho")
	build := exec.Command("go", "build", "-o", bin, "./bench/internal/wsecho")
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building wsecho: %v\n%s", err, out)
	}
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cp := exec.Command("docker", "exec", "-i", container, "sh", "-c", "cat > /tmp/wsecho && chmod +x /tmp/wsecho")
	cp.Stdin = f
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("copying wsecho into %s: %v\n%s", container, err, out)
	}
	args := append([]string{"exec", "-d", container, "/tmp/wsecho", "-addr", ":" + port}, flags...)
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("starting wsecho in %s: %v\n%s", container, err, out)
	}
}
