package sandgate

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoCaddy keeps the lifecycle core and the routing logic usable without Caddy: nothing under
// sandboxes/ or routes/ may import github.com/caddyserver, directly or through another package.
func TestCoreImportsNoCaddy(t *testing.T) {
	for _, pattern := range []string{"./sandboxes/...", "./routes/...", "./agentimage/..."} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pattern).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "matched no packages") {
				continue
			}
			t.Fatalf("go list %s: %v\n%s", pattern, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/caddyserver/") {
				t.Errorf("%s depends on %s; Caddy glue belongs in caddymodule/", pattern, dep)
			}
		}
	}
}
