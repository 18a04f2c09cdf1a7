package sandgate

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sandgate/sandgate"

// goPackage is the part of `go list -json` the layer rules read.
type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel is an import path relative to the module ("" for the root, "sandboxes/docker"...), or the path itself when
// it is outside the module.
func rel(path string) string {
	if path == module {
		return ""
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// dialects are the wire translators under routes/: each one maps the core onto one wire format and never leans on
// another. The other packages under routes/ are libraries the dialects share (the edge's routing, tickets, egress).
var dialects = []string{
	"routes/bayapi", "routes/pages", "routes/fastgpt", "routes/opensandbox", "routes/mcpapi", "routes/admin", "routes/e2b",
}

// TestLayerImports enforces docs/architecture.md: who may import whom. A rule names the packages it governs and a
// predicate over their direct (or, for Caddy, transitive) imports.
func TestLayerImports(t *testing.T) {
	rules := []struct {
		name    string
		governs func(pkg string) bool
		// deps: check transitive dependencies instead of direct imports.
		deps      bool
		forbidden func(pkg, imp string) bool
	}{
		{
			name:      "nothing but caddymodule (and the binary) depends on Caddy",
			governs:   func(p string) bool { return under(p, "sandboxes") || under(p, "routes") || under(p, "agentimage") },
			deps:      true,
			forbidden: func(_, imp string) bool { return strings.HasPrefix(imp, "github.com/caddyserver/") },
		},
		{
			name:    "the core imports no dialect and no Caddy wiring",
			governs: func(p string) bool { return under(p, "sandboxes") },
			forbidden: func(_, imp string) bool {
				return under(imp, "caddymodule") || under(imp, "routes")
			},
		},
		{
			name:    "a dialect never imports another dialect",
			governs: isDialect,
			forbidden: func(p, imp string) bool {
				return isDialect(imp) && !under(imp, p) && !under(p, imp)
			},
		},
		{
			name:      "routes never import caddymodule",
			governs:   func(p string) bool { return under(p, "routes") },
			forbidden: func(_, imp string) bool { return under(imp, "caddymodule") },
		},
		{
			// internal/testing/testenv is the test harness: it inspects what tests made, as an operator's docker CLI would.
			name:    "only the Docker driver talks to the engine",
			governs: func(p string) bool { return !under(p, "sandboxes/docker") && !under(p, "internal/testing/testenv") },
			forbidden: func(_, imp string) bool {
				return strings.HasPrefix(imp, "github.com/docker/docker/client")
			},
		},
		{
			// tickets is the token library the core (service) and the edge share: it stands on nothing of ours.
			name:    "tickets imports nothing of the gateway",
			governs: func(p string) bool { return under(p, "tickets") },
			forbidden: func(_, imp string) bool {
				return imp == "" || under(imp, "sandboxes") || under(imp, "routes") || under(imp, "caddymodule") ||
					under(imp, "internal") || under(imp, "agentimage") || under(imp, "client") || under(imp, "cmd")
			},
		},
		{
			// The test harness (docs/architecture.md): what tests share to drive real engines and gateways. The
			// product never leans on it; only tests and the conformance suite do.
			name:      "product code never imports the test harness",
			governs:   func(p string) bool { return !isHarness(p) },
			forbidden: func(_, imp string) bool { return isHarness(imp) },
		},
		{
			name:    "the agent depends on nothing of the gateway",
			governs: func(p string) bool { return under(p, "agentimage") },
			forbidden: func(_, imp string) bool {
				return under(imp, "sandboxes") || under(imp, "routes") || under(imp, "caddymodule")
			},
		},
	}
	pkgs := listPackages(t)
	for _, rule := range rules {
		t.Run(rule.name, func(t *testing.T) {
			for _, p := range pkgs {
				pkg := rel(p.ImportPath)
				if !rule.governs(pkg) {
					continue
				}
				imports := p.Imports
				if rule.deps {
					imports = p.Deps
				}
				for _, imp := range imports {
					if rule.forbidden(pkg, rel(imp)) {
						t.Errorf("%s imports %s", pkg, rel(imp))
					}
				}
			}
		})
	}
}

// isHarness: pkg is test support, never shipped in the binary: the harness under internal/testing/, the
// Kubernetes harness, and the driver conformance suite (which drives a driver through the harness).
func isHarness(pkg string) bool {
	return under(pkg, "internal/testing") || under(pkg, "internal/k8senv") || under(pkg, "sandboxes/drivertest")
}

func isDialect(pkg string) bool {
	for _, d := range dialects {
		if under(pkg, d) {
			return true
		}
	}
	return false
}

// TestKubernetesIsItsOwnModule enforces the module split of docs/architecture.md: the gateway's module has no k8s.io
// dependency at all (a single-host build never compiles client-go), and client-go is imported only by the
// Kubernetes module (kubernetes/, github.com/sandgate/sandgate/kubernetes), which a fleet build adds with --with.
func TestKubernetesIsItsOwnModule(t *testing.T) {
	isK8s := func(imp string) bool {
		return strings.HasPrefix(imp, "k8s.io/") || strings.HasPrefix(imp, "sigs.k8s.io/")
	}
	t.Run("the gateway module depends on no k8s.io package", func(t *testing.T) {
		for _, p := range listPackages(t) {
			for _, d := range p.Deps {
				if isK8s(d) {
					t.Errorf("%s depends on %s", p.ImportPath, d)
					break
				}
			}
		}
		// Tests too: a test importing client-go would put it back into go.mod.
		gomod, err := os.ReadFile("go.mod")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(gomod), "k8s.io/") {
			t.Errorf("go.mod requires a k8s.io module; it belongs in kubernetes/go.mod")
		}
	})
	t.Run("client-go and every k8s.io import only in the Kubernetes module", func(t *testing.T) {
		out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.go").Output()
		if err != nil {
			t.Fatalf("git ls-files: %v", err)
		}
		for _, file := range strings.Fields(string(out)) {
			if under(file, "kubernetes") || under(file, "node_modules") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, spec := range f.Imports {
				if imp, _ := strconv.Unquote(spec.Path.Value); isK8s(imp) {
					t.Errorf("%s imports %s: Kubernetes code lives in the Kubernetes module (kubernetes/)", file, imp)
				}
			}
		}
	})
}
