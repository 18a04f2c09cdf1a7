package sandboxes

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesListsEveryCodeConstant reads the package's own source: every string constant named Code... is an
// error code, and ErrorCodes must list each exactly once, so the dialects' table tests see every code.
func TestErrorCodesListsEveryCodeConstant(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					declared = append(declared, v)
				}
			}
		}
	}
	listed := ErrorCodes()
	slices.Sort(declared)
	sorted := slices.Clone(listed)
	slices.Sort(sorted)
	if len(declared) == 0 || !slices.Equal(declared, sorted) {
		t.Fatalf("ErrorCodes() = %v, the package declares %v", sorted, declared)
	}
}
