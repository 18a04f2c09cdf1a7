package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Frozen reports whether every process of a running container is frozen by the cgroup freezer, read from the
// kernel (the container's freezer.state on a cgroup v1 or hybrid host, cgroup.events on v2): the truth whoever
// froze it, the engine (`docker pause`) or sandgate's driver, which Docker does not report as paused.
func Frozen(t testing.TB, container string) bool {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.Id}} {{.State.Pid}}", container).CombinedOutput()
	if err != nil {
		t.Fatalf("inspecting %s: %v %s", container, err, out)
	}
	id, pid, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	cg, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
	if err != nil {
		t.Fatalf("reading the cgroups of %s (pid %s): %v", container, pid, err)
	}
	var unified string
	for line := range strings.Lines(string(cg)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], id) {
			continue
		}
		if parts[1] == "freezer" {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer", parts[2], "freezer.state"))
			if err != nil {
				t.Fatalf("reading the freezer of %s: %v", container, err)
			}
			return strings.TrimSpace(string(b)) == "FROZEN"
		}
		if parts[1] == "" {
			unified = parts[2]
		}
	}
	if unified == "" {
		t.Fatalf("container %s has no freezer cgroup in %q", container, cg)
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", unified, "cgroup.events"))
	if err != nil {
		t.Fatalf("reading the cgroup events of %s: %v", container, err)
	}
	return strings.Contains(string(b), "frozen 1")
}
