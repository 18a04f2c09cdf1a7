package sandgate

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// roadForbidden are the core's objects a dialect may not name: the lifecycle Manager, its store and its
// constructors. A dialect reaches them only through sandboxes/service (docs/architecture.md, "One road").
var roadForbidden = map[string]bool{
	"Manager": true, "NewManager": true, "BoltStore": true, "NewBoltStore": true, "Store": true, "Driver": true,
}

// TestDialectsTakeTheRoad enforces the one road into the core: route -> sandboxes/service -> Manager. In the
// non-test files of every dialect (routes/sandboxroute, the edge library, is not one):
//   - no identifier of package sandboxes names the Manager, the store, a driver or their constructors
//     (roadForbidden): the dialect imports sandboxes for its types and codes only;
//   - no method of *sandboxes.Manager or *sandboxes.BoltStore is called;
//   - no interface it declares is satisfied by *sandboxes.Manager: a dialect cannot take the Manager through an
//     interface of its own (as opensandbox.Sandboxes and pages.Lifecycle once did). It depends on *service.Service
//     or on interfaces that only the service satisfies.
func TestDialectsTakeTheRoad(t *testing.T) {
	exports := exportData(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(f)
	})
	core, err := imp.Import(module + "/sandboxes")
	if err != nil {
		t.Fatalf("importing sandboxes: %v", err)
	}
	mgr := types.NewPointer(core.Scope().Lookup("Manager").Type())
	store := types.NewPointer(core.Scope().Lookup("BoltStore").Type())
	for _, d := range dialects {
		files, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var syntax []*ast.File
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			syntax = append(syntax, af)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{},
			Defs: map[*ast.Ident]types.Object{}}
		_, err = (&types.Config{Importer: imp}).Check(module+"/"+d, fset, syntax, info)
		if err != nil {
			t.Fatalf("type-checking %s: %v", d, err)
		}
		for id, obj := range info.Uses {
			if obj.Pkg() != nil && obj.Pkg().Path() == module+"/sandboxes" && roadForbidden[obj.Name()] && obj.Parent() == core.Scope() {
				t.Errorf("%s: %s names sandboxes.%s: a dialect reaches the core through sandboxes/service", d, fset.Position(id.Pos()), obj.Name())
			}
		}
		for sel, s := range info.Selections {
			if s.Kind() != types.MethodVal && s.Kind() != types.MethodExpr {
				continue
			}
			recv := s.Recv()
			if types.Identical(recv, mgr) || types.Identical(recv, store) || types.Identical(types.NewPointer(recv), mgr) {
				t.Errorf("%s: %s calls %s.%s: a dialect reaches the core through sandboxes/service", d, fset.Position(sel.Pos()), recv, sel.Sel.Name)
			}
		}
		// Interfaces of the module's own (the dialect's, or one such as service.Sandboxes) that the Manager
		// satisfies: the dialect would take the Manager through them.
		seen := map[types.Object]bool{}
		for _, objs := range []map[*ast.Ident]types.Object{info.Defs, info.Uses} {
			for id, obj := range objs {
				tn, ok := obj.(*types.TypeName)
				if !ok || seen[obj] || tn.Pkg() == nil || !strings.HasPrefix(tn.Pkg().Path(), module) {
					continue
				}
				seen[obj] = true
				iface, ok := tn.Type().Underlying().(*types.Interface)
				if ok && iface.NumMethods() > 0 && types.Implements(mgr, iface) {
					t.Errorf("%s: %s: interface %s.%s is satisfied by *sandboxes.Manager: depend on sandboxes/service instead",
						d, fset.Position(id.Pos()), tn.Pkg().Name(), tn.Name())
				}
			}
		}
	}
}

// exportData maps every package the dialects depend on to its compiled export data (go list -export).
func exportData(t *testing.T) map[string]string {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-json=ImportPath,Export"}
	for _, d := range dialects {
		args = append(args, "./"+d)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	m := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		m[p.ImportPath] = p.Export
	}
	return m
}
