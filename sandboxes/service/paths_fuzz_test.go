package service

import (
	"path"
	"strings"
	"testing"
)

// FuzzCleanWorkspacePath: the gateway's check of a tenant's workspace path never lets a path out: an accepted path
// is clean, relative, NUL-free and does not climb above the workspace.
func FuzzCleanWorkspacePath(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/etc/passwd", "a/../../b", "\\x", "a\x00b", ".", "./a/./b/", "..", " "} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, p string, allowRoot bool) {
		c, err := CleanWorkspacePath("path", p, allowRoot)
		if err != nil {
			if e := AsError(err); e.Code != CodeInvalidPath || e.Details["field"] != "path" || e.Details["reason"] == "" {
				t.Fatalf("%q: %v is not invalid_path with Bay's {field, reason}", p, err)
			}
			return
		}
		if c != path.Clean(c) || strings.HasPrefix(c, "/") || c == ".." || strings.HasPrefix(c, "../") ||
			strings.ContainsRune(c, 0) || (c == "." && !allowRoot) {
			t.Fatalf("%q accepted as %q", p, c)
		}
		if joined := path.Join(WorkspaceRoot, c); joined != WorkspaceRoot && !strings.HasPrefix(joined, WorkspaceRoot+"/") {
			t.Fatalf("%q leads to %s", p, joined)
		}
	})
}
