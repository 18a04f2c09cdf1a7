package startup

import (
	"crypto/sha256"
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

// depsHash identifies a set of packages, so a restarted sandbox whose workspace already holds them skips the install.
func depsHash(kind string, pkgs []string) string {
	b, _ := json.Marshal(append([]string{kind}, pkgs...))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
