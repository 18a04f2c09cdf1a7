package kubernetes_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"sigs.k8s.io/yaml"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestKubernetesDeployCaddyfileAdapts adapts deploy/kubernetes/Caddyfile as it ships, in the environment its
// kustomization gives every replica (the literals of its settings ConfigMap; the secrets are runtime placeholders,
// not read at adapt time), and compares the JSON with testdata/deploy_kubernetes.json (SANDGATE_UPDATE_GOLDEN=1
// rewrites it). TestFleetOnKubernetes (make test-k8s) runs the same file as a fleet on the test cluster.
func TestKubernetesDeployCaddyfileAdapts(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "deploy", "kubernetes")
	caddyfile, err := os.ReadFile(filepath.Join(dir, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		ConfigMapGenerator []struct {
			Name     string   `json:"name"`
			Literals []string `json:"literals"`
		} `json:"configMapGenerator"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	settings := 0
	for _, g := range k.ConfigMapGenerator {
		if g.Name != "sandgate-settings" {
			continue
		}
		for _, l := range g.Literals {
			name, value, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("kustomization.yaml: setting %q is not NAME=value", l)
			}
			t.Setenv(name, value)
			settings++
		}
	}
	if settings == 0 {
		t.Fatal("kustomization.yaml has no sandgate-settings literals")
	}
	// Unset in a Pod, whatever the test's own environment holds.
	for _, name := range []string{"SANDGATE_KUBECONFIG", "POD_NAME", "SANDGATE_HTTP_PORT", "SANDGATE_HTTPS_PORT", "SANDGATE_BAY_PORT"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}

	golden := filepath.Join("testdata", "deploy_kubernetes.json")
	if os.Getenv("SANDGATE_UPDATE_GOLDEN") != "" {
		out, err := adaptToJSON(string(caddyfile))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !caddytest.CompareAdapt(t, "deploy/kubernetes/Caddyfile", string(caddyfile), "caddyfile", strings.TrimSpace(string(want))) {
		t.Errorf("deploy/kubernetes/Caddyfile: adapted JSON differs from %s (SANDGATE_UPDATE_GOLDEN=1 rewrites it)", golden)
	}
}
