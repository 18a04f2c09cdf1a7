package sandboxes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// EngineSockets are the host paths of the container engines' control sockets a bind must never expose: whoever
// can connect to one owns the host. The Docker driver adds the socket of the engine it actually talks to.
var EngineSockets = []string{
	"/var/run/docker.sock",
	"/run/docker.sock",
	"/run/containerd/containerd.sock",
	"/var/run/containerd/containerd.sock",
	"/run/docker/containerd/containerd.sock",
	"/var/run/docker/containerd/containerd.sock",
	"/run/containerd/containerd.sock.ttrpc",
}

// ErrEngineSocketBind is the typed refusal of a bind that would hand a sandbox a container engine.
var ErrEngineSocketBind = errors.New("bind would hand the sandbox a container engine")

// CheckBindSource refuses a host bind source that is, or contains, one of the protected paths. Both sides are
// compared as written and with every symlink resolved (/var/run is a link to /run on most distributions, and an
// operator's /srv/x may be a link to /run), so "/", "/run", "/var/run", "/run/docker.sock" and a link to any of
// them are all refused. A source that is a hard link to a protected socket (same device and inode) is refused too.
// Protected paths that do not exist on this host are still compared as written.
func CheckBindSource(source string, protected []string) error {
	if !filepath.IsAbs(source) {
		return fmt.Errorf("bind source %q is not an absolute path", source)
	}
	srcForms := pathForms(source)
	for _, p := range protected {
		for _, pf := range pathForms(p) {
			for _, sf := range srcForms {
				if contains(sf, pf) {
					return fmt.Errorf("%w: %s contains %s", ErrEngineSocketBind, source, p)
				}
			}
		}
		if sameFile(source, p) {
			return fmt.Errorf("%w: %s is the same file as %s", ErrEngineSocketBind, source, p)
		}
	}
	return nil
}

// contains says whether dir is path or one of its ancestors.
func contains(dir, path string) bool {
	if dir == path || dir == "/" {
		return true
	}
	return strings.HasPrefix(path, dir+"/")
}

// pathForms is p cleaned, plus p with its symlinks resolved (as far as the path exists).
func pathForms(p string) []string {
	clean := filepath.Clean(p)
	forms := []string{clean}
	if r := resolveExisting(clean); r != clean {
		forms = append(forms, r)
	}
	return forms
}

// resolveExisting resolves the symlinks of the longest existing prefix of p and appends the rest unchanged.
func resolveExisting(p string) string {
	rest := ""
	cur := p
	for {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil || sa.Mode().Type() != fs.ModeSocket {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
