package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// FuzzResolve: whatever path a tenant sends, Resolve and ResolveParent (absolute and workspace-relative roots)
// either refuse it with invalid_path or return a path that stays inside the workspace once every existing symlink
// in it is followed. The workspace holds symlinks out of it (absolute, relative, to a sibling sharing the root's
// name as a prefix, a loop) so the fuzzer can use them.
func FuzzResolve(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	sibling := filepath.Join(base, "ws2")
	for _, d := range []string{filepath.Join(root, "sub", "deep"), outside, sibling} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"escape": outside, "rel-escape": "../outside", "to-sibling": "../ws2", "sub/up": "../..",
		"inside": "sub/deep", "loop": "loop", "etc": "/etc", "sub/deep/home": root,
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	abs, err := New(root)
	if err != nil {
		f.Fatal(err)
	}
	rel, err := NewRelative(root)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", ".", "sub/f", "../outside", "/etc/passwd", root + "/../ws2/x", "escape/x",
		"rel-escape", "to-sibling/a", "sub/up/outside", "inside/../../outside", "loop/x", "etc/passwd",
		"sub/deep/home/escape", "/../../etc", "a\x00b", "sub//deep/./..", root, root + "2/x", "~/x", "\\..\\x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, r := range []*Root{abs, rel} {
			for name, resolve := range map[string]func(string) (string, error){"Resolve": r.Resolve, "ResolveParent": r.ResolveParent} {
				got, err := resolve(p)
				if err != nil {
					var ae *agentapi.Error
					if !errors.As(err, &ae) || ae.Code != agentapi.CodeInvalidPath {
						t.Fatalf("%s(%q): untyped error %v", name, p, err)
					}
					continue
				}
				if !within(r.dir, got) {
					t.Fatalf("%s(%q) = %s, outside %s", name, p, got, r.dir)
				}
				checked := got
				if name == "ResolveParent" {
					checked = filepath.Dir(got) // the last element is deliberately not followed
				}
				if real, err := filepath.EvalSymlinks(checked); err == nil && !within(r.dir, real) {
					t.Fatalf("%s(%q) = %s, which leads to %s", name, p, got, real)
				}
				if strings.IndexByte(got, 0) >= 0 {
					t.Fatalf("%s(%q) = %q holds a NUL", name, p, got)
				}
			}
		}
	})
}
