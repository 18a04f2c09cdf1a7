package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func TestResolve(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	sibling := filepath.Join(base, "ws2") // shares the root's name as a prefix
	for _, d := range []string{root, outside, sibling, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(root, "sub", "f.txt"), []byte("x"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(root, "escape")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(root, "passwd")))
	must(t, os.Symlink("sub/f.txt", filepath.Join(root, "inside-link")))
	must(t, os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "abs-inside-dir")))
	must(t, os.Symlink("../ws2", filepath.Join(root, "to-sibling")))

	r, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string // want "" means invalid_path
	}{
		{"empty is root", "", root},
		{"dot", ".", root},
		{"relative file", "sub/f.txt", filepath.Join(root, "sub/f.txt")},
		{"relative not yet existing", "new/dir/file", filepath.Join(root, "new/dir/file")},
		{"absolute inside", filepath.Join(root, "sub"), filepath.Join(root, "sub")},
		{"dotdot that stays inside", "sub/../sub/f.txt", filepath.Join(root, "sub/f.txt")},
		{"dotdot escape", "../outside", ""},
		{"deep dotdot escape", "sub/../../outside/x", ""},
		{"absolute outside", "/etc/passwd", ""},
		{"absolute sibling with root prefix", sibling + "/x", ""},
		{"NUL byte", "sub/f\x00.txt", ""},
		{"symlink dir escape", "escape/secret", ""},
		{"symlink file escape", "passwd", ""},
		{"symlink to sibling prefix", "to-sibling/x", ""},
		{"symlink inside", "inside-link", filepath.Join(root, "sub/f.txt")},
		{"absolute symlink inside", "abs-inside-dir/f.txt", filepath.Join(root, "sub/f.txt")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Resolve(tc.path)
			if tc.want == "" {
				var e *agentapi.Error
				if !errors.As(err, &e) || e.Code != agentapi.CodeInvalidPath {
					t.Fatalf("Resolve(%q) = %q, %v; want invalid_path", tc.path, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
			}
		})
	}
}

// TestResolveRootThroughSymlink: a root configured through a symlink accepts absolute paths under either name.
func TestResolveRootThroughSymlink(t *testing.T) {
	base := t.TempDir()
	resolved := filepath.Join(base, "data", "ws")
	must(t, os.MkdirAll(resolved, 0o755))
	link := filepath.Join(base, "workspace")
	must(t, os.Symlink(resolved, link))
	r, err := New(link)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link + "/a/b", resolved + "/a/b", "a/b"} {
		got, err := r.Resolve(p)
		if err != nil || got != filepath.Join(resolved, "a/b") {
			t.Fatalf("Resolve(%q) = %q, %v", p, got, err)
		}
	}
	if _, err := r.Resolve(link + "x/a"); err == nil {
		t.Fatal("sibling of the configured name accepted")
	}
}

func TestResolveParentKeepsLink(t *testing.T) {
	root := t.TempDir()
	must(t, os.Symlink("/etc", filepath.Join(root, "etc-link")))
	r, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.ResolveParent("etc-link")
	if err != nil || got != filepath.Join(r.Dir(), "etc-link") {
		t.Fatalf("ResolveParent = %q, %v", got, err)
	}
	if _, err := r.ResolveParent("."); err == nil {
		t.Fatal("ResolveParent(root) must refuse")
	}
	if _, err := r.ResolveParent("etc-link/passwd"); err == nil {
		t.Fatal("ResolveParent through an escaping link must refuse")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestResolveRelative: with NewRelative every path is workspace-relative (FastGPT's IDE agent): a leading '/' is
// dropped and `..` stops at the root; only a symlink can lead outside, and that is refused with ErrOutside.
func TestResolveRelative(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.Symlink(outside, filepath.Join(root, "escape")))
	must(t, os.Symlink("sub", filepath.Join(root, "inside-link")))
	r, err := NewRelative(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string // want "" means invalid_path matching ErrOutside
	}{
		{"empty is root", "", root},
		{"slash is root", "/", root},
		{"leading slash dropped", "/sub/f.txt", filepath.Join(root, "sub/f.txt")},
		{"absolute system path is relative", "/etc/passwd", filepath.Join(root, "etc/passwd")},
		{"dotdot stops at the root", "../../outside/x", filepath.Join(root, "outside/x")},
		{"symlink inside", "inside-link/x", filepath.Join(root, "sub/x")},
		{"symlink escape", "escape/secret", ""},
		{"symlink escape behind dotdot", "/../escape", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Resolve(tc.path)
			if tc.want == "" {
				var e *agentapi.Error
				if !errors.As(err, &e) || e.Code != agentapi.CodeInvalidPath || !errors.Is(err, ErrOutside) {
					t.Fatalf("Resolve(%q) = %q, %v; want invalid_path matching ErrOutside", tc.path, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
			}
		})
	}
	if _, err := r.Resolve("a\x00b"); err == nil || errors.Is(err, ErrOutside) {
		t.Fatalf("NUL byte: %v, want invalid_path that is not ErrOutside", err)
	}
}

func TestWithAlso(t *testing.T) {
	base := t.TempDir()
	root, home, outside := filepath.Join(base, "ws"), filepath.Join(base, "home"), filepath.Join(base, "outside")
	for _, d := range []string{root, home, outside} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.Symlink(outside, filepath.Join(home, "escape")))
	must(t, os.Symlink(home, filepath.Join(base, "home-link")))
	ws, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ws.WithAlso(filepath.Join(base, "home-link")) // configured through a symlink, as a root may be
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Resolve(filepath.Join(home, "x")); !errors.Is(err, ErrOutside) {
		t.Fatalf("the original root changed: %v", err)
	}
	for _, tc := range []struct {
		name, path, want string // want "" means refused
	}{
		{"relative stays in the workspace", ".npmrc", filepath.Join(root, ".npmrc")},
		{"absolute in home", filepath.Join(home, ".npmrc"), filepath.Join(home, ".npmrc")},
		{"home by its configured name", filepath.Join(base, "home-link", "a"), filepath.Join(home, "a")},
		{"home itself", home, home},
		{"symlink out of home", filepath.Join(home, "escape", "x"), ""},
		{"dotdot out of home", filepath.Join(home, "..", "outside"), ""},
		{"elsewhere", outside, ""},
		{"home's parent", base, ""},
	} {
		got, err := r.Resolve(tc.path)
		if tc.want == "" {
			if !errors.Is(err, ErrOutside) {
				t.Errorf("%s: Resolve(%q) = %q, %v; want refused", tc.name, tc.path, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: Resolve(%q) = %q, %v; want %q", tc.name, tc.path, got, err, tc.want)
		}
	}
	if _, err := r.ResolveParent(home); err == nil {
		t.Fatal("home itself may not be removed or moved")
	}
	if got := r.Rel(filepath.Join(home, "a")); got != filepath.Join(home, "a") {
		t.Fatalf("Rel of a home path %q", got)
	}
	if _, err := ws.WithAlso("/"); err == nil {
		t.Fatal("/ accepted as an extra root")
	}
}
