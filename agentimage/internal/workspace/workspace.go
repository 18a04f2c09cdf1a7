// Package workspace resolves caller-supplied paths against the sandbox's workspace root. Every file the agent's
// API touches goes through Root: relative paths, absolute paths inside the root, never a path that leaves it, by
// `..`, by an absolute path elsewhere, or through a symlink. The FastGPT IDE agent uses the same Root built by
// NewRelative, where every path is workspace-relative.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Root is a workspace root. Its zero value is unusable; use New or NewRelative.
type Root struct {
	dir      string // absolute, symlinks resolved
	given    string // absolute as configured (differs from dir when the root is reached through a symlink)
	relative bool   // every path is workspace-relative (NewRelative)
	// also are further directories absolute paths may name (WithAlso: the user's home for the execd API); relative
	// paths still resolve against dir.
	also []alsoDir
}

type alsoDir struct{ dir, given string }

// ErrOutside is matched (errors.Is) by the error for a path that leaves the workspace: by `..`, an absolute path
// elsewhere, or a symlink. The error is an *agentapi.Error (invalid_path) all the same.
var ErrOutside = errors.New("path escapes the workspace")

// New returns the root for dir, which must exist.
func New(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	return &Root{dir: resolved, given: filepath.Clean(abs)}, nil
}

// NewRelative returns a root for dir, which must exist, where every path is workspace-relative, as FastGPT's IDE
// agent has them: a leading '/' is dropped and `..` stops at the root (as in a chroot), so "/a/../../b" is <root>/b.
// Only a symlink can then point outside, and that is refused as with New.
func NewRelative(dir string) (*Root, error) {
	r, err := New(dir)
	if err != nil {
		return nil, err
	}
	r.relative = true
	return r, nil
}

// WithAlso returns a copy of r under which absolute paths may also name something in dirs (each must exist), as
// execd's clients expect of the user's home. A dir that is "/" is refused: it would lift the confinement. Relative
// paths still resolve against the workspace, and each extra directory itself is protected like the root.
func (r *Root) WithAlso(dirs ...string) (*Root, error) {
	out := *r
	out.also = append([]alsoDir(nil), r.also...)
	for _, d := range dirs {
		n, err := New(d)
		if err != nil {
			return nil, err
		}
		if n.dir == "/" {
			return nil, fmt.Errorf("workspace: %q would allow every path", d)
		}
		out.also = append(out.also, alsoDir{dir: n.dir, given: n.given})
	}
	return &out, nil
}

// Dirs are the directories paths may name: the root first, then those added by WithAlso.
func (r *Root) Dirs() []string {
	out := []string{r.dir}
	for _, a := range r.also {
		out = append(out, a.dir)
	}
	return out
}

// Dir is the root's absolute, symlink-free path.
func (r *Root) Dir() string { return r.dir }

// Resolve returns the absolute path for p with every symlink in it resolved, refusing paths outside the root with
// invalid_path. p may name something that does not exist yet; then its existing prefix is resolved.
func (r *Root) Resolve(p string) (string, error) {
	abs, err := r.lexical(p)
	if err != nil {
		return "", err
	}
	return r.resolveExisting(p, abs)
}

// ResolveParent is Resolve for operations on a directory entry itself (remove, move, the link of a symlink): the
// parent directory is resolved, the last element is kept as is. The root itself is refused.
func (r *Root) ResolveParent(p string) (string, error) {
	abs, err := r.lexical(p)
	if err != nil {
		return "", err
	}
	if abs == r.dir {
		return "", invalid(p, "this operation cannot target the workspace root")
	}
	for _, a := range r.also {
		if abs == a.dir {
			return "", invalid(p, "this operation cannot target "+a.given)
		}
	}
	parent, err := r.resolveExisting(p, filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	return filepath.Join(parent, filepath.Base(abs)), nil
}

// Rel returns abs relative to the root ("." for the root), for answers to callers; a path in a directory added by
// WithAlso stays absolute.
func (r *Root) Rel(abs string) string {
	if !within(r.dir, abs) {
		return abs
	}
	rel, err := filepath.Rel(r.dir, abs)
	if err != nil {
		return abs
	}
	return filepath.ToSlash(rel)
}

// lexical cleans p against the root and checks it stays inside without looking at the file system.
func (r *Root) lexical(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", invalid(p, "path contains a NUL byte")
	}
	var abs string
	if r.relative {
		abs = filepath.Join(r.dir, filepath.Clean("/"+p))
	} else if filepath.IsAbs(p) {
		abs = filepath.Clean(p)
		if r.given != r.dir && within(r.given, abs) {
			// the root's configured name, e.g. /workspace -> /data/ws: same place
			abs = filepath.Join(r.dir, strings.TrimPrefix(abs, r.given))
		} else {
			for _, a := range r.also {
				if a.given != a.dir && within(a.given, abs) {
					abs = filepath.Join(a.dir, strings.TrimPrefix(abs, a.given))
					break
				}
			}
		}
	} else {
		abs = filepath.Join(r.dir, p)
	}
	if !r.contains(abs) {
		if len(r.also) > 0 {
			return "", outside(p, "path is outside "+strings.Join(r.Dirs(), " and "))
		}
		return "", outside(p, "path is outside the workspace")
	}
	return abs, nil
}

// contains reports whether abs is the root or below it, or one of the WithAlso directories or below one.
func (r *Root) contains(abs string) bool {
	if within(r.dir, abs) {
		return true
	}
	for _, a := range r.also {
		if within(a.dir, abs) {
			return true
		}
	}
	return false
}

// within is a separator-aware prefix check: /workspace2 is not inside /workspace.
func within(dir, abs string) bool {
	if abs == dir {
		return true
	}
	prefix := dir
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(abs, prefix)
}

// resolveExisting evaluates symlinks on the longest existing prefix of abs and re-checks containment.
func (r *Root) resolveExisting(orig, abs string) (string, error) {
	existing, rest := abs, ""
	for {
		resolved, err := filepath.EvalSymlinks(existing)
		if err == nil {
			full := resolved
			if rest != "" {
				full = filepath.Join(resolved, rest)
			}
			if !r.contains(full) {
				return "", outside(orig, "path leaves the workspace through a symlink")
			}
			return full, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
			// ENOTDIR, ELOOP, EACCES: the path cannot be resolved as given.
			return "", agentapi.Errorf(agentapi.CodeInvalidPath, "%s: %v", orig, err)
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return "", invalid(orig, "no existing prefix")
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
}

func invalid(p, why string) *agentapi.Error {
	return agentapi.Errorf(agentapi.CodeInvalidPath, "%q: %s", p, why).With("path", p)
}

// outside is invalid for a path that leaves the workspace; it also matches ErrOutside.
func outside(p, why string) error { return outsideError{invalid(p, why)} }

type outsideError struct{ err *agentapi.Error }

func (e outsideError) Error() string   { return e.err.Error() }
func (e outsideError) Unwrap() []error { return []error{e.err, ErrOutside} }
