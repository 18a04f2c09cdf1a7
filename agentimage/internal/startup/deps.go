package startup

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
)

// ErrAptAtRuntime explains why apt dependencies are refused by the agent.
const ErrAptAtRuntime = "apt packages cannot be installed in a running sandbox (it runs as a non-root user on a read-only " +
	"root filesystem): build a derived image with them (`make profile-images`) and use it as the profile's image"

// pythonRequirements turns {name: version} into pip arguments, sorted for a stable order.
func pythonRequirements(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for name, v := range m {
		switch {
		case v == "" || v == "*":
			out = append(out, name)
		case strings.ContainsAny(v[:1], "=<>~!"):
			out = append(out, name+v)
		default:
			out = append(out, name+"=="+v)
		}
	}
	sort.Strings(out)
	return out
}

// nodePackages turns {name: range} into npm arguments.
func nodePackages(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for name, v := range m {
		if v == "" {
			out = append(out, name)
		} else {
			out = append(out, name+"@"+v)
		}
	}
	sort.Strings(out)
	return out
}

// rProgram installs and checks R dependencies (rdeps.R: the agent runs it at start, make profile-images after apt).
//
//go:embed rdeps.R
var rProgram string

// DefaultCRANMirror is where R dependencies come from when the profile names no cran_mirror (CRAN's own
// redirector, which picks a nearby mirror).
const DefaultCRANMirror = "https://cloud.r-project.org"

// rPackages turns {name: version} into rdeps.R's <package> <version> argument pairs, sorted by name; "*" is "".
func rPackages(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]string, 0, 2*len(m))
	for _, name := range names {
		v := m[name]
		if v == "*" {
			v = ""
		}
		out = append(out, name, v)
	}
	return out
}

// depsHash identifies a set of packages, so a restarted sandbox whose workspace already holds them skips the install.
func depsHash(kind string, pkgs []string) string {
	b, _ := json.Marshal(append([]string{kind}, pkgs...))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
