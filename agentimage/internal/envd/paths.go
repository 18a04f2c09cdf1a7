package envd

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// paths translates between E2B's paths and the workspace. E2B code names files under /home/user (or relative to
// it, or with "~"); those are the workspace's files. A path naming the workspace by its own directory works too.
// Anything else is outside what the sandbox's file APIs serve and is refused, as by the agent's own file API.
type paths struct {
	root *workspace.Root
}

// errOutside marks a path outside the workspace (the caller answers permission_denied).
var errOutside = errors.New("outside the workspace")

type pathError struct {
	path   string
	reason string
	cause  error
}

func (e *pathError) Error() string { return fmt.Sprintf("path '%s': %s", e.path, e.reason) }
func (e *pathError) Unwrap() error { return e.cause }

// clean is p as E2B names it: absolute, cleaned, "~" expanded, relative paths joined to the home.
func (paths) clean(p string) string {
	switch {
	case p == "" || p == "~":
		return HomeDir
	case strings.HasPrefix(p, "~/"):
		return path.Join(HomeDir, p[2:])
	case !strings.HasPrefix(p, "/"):
		return path.Join(HomeDir, p)
	}
	return path.Clean(p)
}

// lexical maps an E2B path onto the workspace without touching the file system.
func (t paths) lexical(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", &pathError{path: p, reason: "contains a NUL byte"}
	}
	e := t.clean(p)
	dir := t.root.Dir()
	switch {
	case e == HomeDir:
		return dir, nil
	case strings.HasPrefix(e, HomeDir+"/"):
		return filepath.Join(dir, e[len(HomeDir):]), nil
	case e == dir || strings.HasPrefix(e, strings.TrimSuffix(dir, "/")+"/"):
		return e, nil
	}
	return "", &pathError{path: p, reason: "is outside the sandbox's files (" + HomeDir + ", the workspace)", cause: errOutside}
}

// resolve maps an E2B path onto the workspace with symlinks resolved; a symlink out of the workspace is refused.
func (t paths) resolve(p string) (string, error) {
	abs, err := t.lexical(p)
	if err != nil {
		return "", err
	}
	real, err := t.root.Resolve(abs)
	return real, wrapRoot(p, err)
}

// resolveEntry is resolve for operations on the entry itself (remove, move, lstat): its parent is resolved, the
// last element kept, so a symlink is acted on rather than followed.
func (t paths) resolveEntry(p string) (string, error) {
	abs, err := t.lexical(p)
	if err != nil {
		return "", err
	}
	if abs == t.root.Dir() {
		return abs, nil
	}
	real, err := t.root.ResolveParent(abs)
	return real, wrapRoot(p, err)
}

func wrapRoot(p string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, workspace.ErrOutside) {
		return &pathError{path: p, reason: "leaves the sandbox's files", cause: errOutside}
	}
	return &pathError{path: p, reason: "cannot be resolved", cause: err}
}

// external is how E2B sees a real path: under /home/user when it is in the workspace.
func (t paths) external(real string) string {
	dir := t.root.Dir()
	if real == dir {
		return HomeDir
	}
	if rest, ok := strings.CutPrefix(real, strings.TrimSuffix(dir, "/")+"/"); ok {
		return HomeDir + "/" + filepath.ToSlash(rest)
	}
	return real
}
