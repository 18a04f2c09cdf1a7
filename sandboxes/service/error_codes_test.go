package service

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestErrorCodesListsEveryCode: ErrorCodes names every Code constant of errors.go, so a dialect test that walks it
// meets a new code.
func TestErrorCodesListsEveryCode(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, n := range spec.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, "Code") {
					names = append(names, n.Name)
				}
			}
		}
	}
	if len(names) != len(ErrorCodes()) {
		t.Fatalf("errors.go declares %d codes %v; ErrorCodes lists %d", len(names), names, len(ErrorCodes()))
	}
	seen := map[string]bool{}
	for _, c := range ErrorCodes() {
		if c == "" || seen[c] {
			t.Errorf("code %q is empty or listed twice", c)
		}
		seen[c] = true
	}
}
