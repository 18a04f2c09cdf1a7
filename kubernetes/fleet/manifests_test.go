package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// The namespaces deploy/kubernetes ships with, which a test replaces with namespaces of its own.
const (
	shippedGatewayNS = "sandgate"
	shippedSandboxNS = "sandboxes"
)

// deployDir is deploy/kubernetes as it ships.
func deployDir() string { return filepath.Join(testenv.RepoRoot(), "deploy", "kubernetes") }

// withComponent is a copy of deploy/kubernetes with one of its components enabled as its README says: the
// commented `components:` lines of kustomization.yaml uncommented.
func withComponent(t *testing.T, component string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(deployDir())); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kustomization.yaml")
	k, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	commented := "# components:\n# - " + component + "\n"
	if !strings.Contains(string(k), commented) {
		t.Fatalf("deploy/kubernetes/kustomization.yaml has no commented %q to enable", commented)
	}
	k = []byte(strings.Replace(string(k), commented, "components:\n- "+component+"\n", 1))
	if err := os.WriteFile(path, k, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// setting is a value of the rendered settings ConfigMap, the gateways' environment.
func setting(t *testing.T, objs []*unstructured.Unstructured, key string) string {
	t.Helper()
	for _, o := range ofKind(objs, "ConfigMap") {
		if strings.HasPrefix(o.GetName(), "sandgate-settings") {
			if v, ok, _ := unstructured.NestedString(o.Object, "data", key); ok {
				return v
			}
		}
	}
	t.Fatalf("the rendered settings have no %s", key)
	return ""
}

// shippedManifests renders dir (deploy/kubernetes, or a copy of it) with the cluster's own kubectl (`kubectl
// kustomize`, as `kubectl apply -k` does) and moves every object from the shipped namespaces into the test's: the
// Namespace objects, each object's namespace, and the RoleBinding's subject. Nothing else is changed.
func shippedManifests(ctx context.Context, t *testing.T, kube *testenv.Kube, dir, gatewayNS, sandboxNS string) []*unstructured.Unstructured {
	t.Helper()
	out, err := kube.Run(ctx, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	rename := map[string]string{shippedGatewayNS: gatewayNS, shippedSandboxNS: sandboxNS}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding the rendered manifests: %v", err)
		}
		if m == nil {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetKind() == "Namespace" {
			o.SetName(renamed(t, rename, o.GetName()))
		} else if o.GetNamespace() != "" {
			o.SetNamespace(renamed(t, rename, o.GetNamespace()))
		}
		if o.GetKind() == "RoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if s, ok := s.(map[string]any); ok && s["namespace"] != nil {
					s["namespace"] = renamed(t, rename, fmt.Sprint(s["namespace"]))
				}
			}
			if err := unstructured.SetNestedSlice(o.Object, subjects, "subjects"); err != nil {
				t.Fatal(err)
			}
		}
		objs = append(objs, o)
	}
	return objs
}

func renamed(t *testing.T, rename map[string]string, ns string) string {
	t.Helper()
	n, ok := rename[ns]
	if !ok {
		t.Fatalf("deploy/kubernetes uses namespace %q, not one of the two it documents", ns)
	}
	return n
}

// applyObjects applies objs (a v1 List) with kubectl; extra are kubectl's flags (e.g. --dry-run=server).
func applyObjects(ctx context.Context, kube *testenv.Kube, objs []*unstructured.Unstructured, extra ...string) ([]byte, error) {
	items := make([]any, len(objs))
	for i, o := range objs {
		items[i] = o.Object
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return nil, err
	}
	return kube.RunInput(ctx, list, append([]string{"apply", "-f", "-"}, extra...)...)
}

// ofKind is the objects of objs whose kind is one of kinds.
func ofKind(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		for _, k := range kinds {
			if o.GetKind() == k {
				out = append(out, o)
			}
		}
	}
	return out
}

// serviceAccountKubeconfig is a kubeconfig file for ServiceAccount sa of namespace ns on the test cluster: the
// admin kubeconfig's server and CA, and a token the API issued for sa. A gateway on it has exactly what its Pod would
// have with that ServiceAccount.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, kube *testenv.Kube, ns, sa string) string {
	t.Helper()
	token, err := kube.Run(ctx, "-n", ns, "create", "token", sa, "--duration", "2h")
	if err != nil {
		t.Fatalf("a token for %s/%s: %v", ns, sa, err)
	}
	raw, err := kube.Run(ctx, "config", "view", "--raw", "--minify", "--flatten", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var admin struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CAData string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal(raw, &admin); err != nil || len(admin.Clusters) != 1 {
		t.Fatalf("the admin kubeconfig: %v %s", err, raw)
	}
	c := admin.Clusters[0].Cluster
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "sa",
		"clusters": []any{map[string]any{"name": "test", "cluster": map[string]any{
			"server": c.Server, "certificate-authority-data": c.CAData}}},
		"users":    []any{map[string]any{"name": sa, "user": map[string]any{"token": strings.TrimSpace(string(token))}}},
		"contexts": []any{map[string]any{"name": "sa", "context": map[string]any{"cluster": "test", "user": sa}}},
	}
	b, err := json.Marshal(cfg) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+sa)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
