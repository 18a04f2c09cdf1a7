package startup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Package names and versions are checked strictly before anything reaches an installer's command line.
var (
	pythonName    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?$`)
	pythonVersion = regexp.MustCompile(`^((==|>=|<=|~=|!=|<|>)?[0-9A-Za-z.*+!]{1,64})(,(==|>=|<=|~=|!=|<|>)[0-9A-Za-z.*+!]{1,64}){0,4}$`)
	nodeName      = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]{0,100}/)?[a-z0-9][a-z0-9._-]{0,213}$`)
	nodeVersion   = regexp.MustCompile(`^[0-9A-Za-z.^~<>=*+ |-]{1,64}$`)
	aptName       = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{1,100}(=[A-Za-z0-9.+~:-]{1,64})?$`)
)

// ErrAptAtRuntime explains why apt dependencies are refused by the agent.
const ErrAptAtRuntime = "apt packages cannot be installed in a running sandbox (it runs as a non-root user on a read-only " +
	"root filesystem): build a derived image with them (`make profile-images`) and use it as the profile's image"

// ValidateDependencies checks every name and version.
func ValidateDependencies(d agentapi.Dependencies) error {
	for name, v := range d.Python {
		if !pythonName.MatchString(name) {
			return fmt.Errorf("python dependency %q: not a valid package name", name)
		}
		if v != "" && v != "*" && !pythonVersion.MatchString(v) {
			return fmt.Errorf("python dependency %q: version %q is not a version or specifier", name, v)
		}
	}
	for name, v := range d.Node {
		if !nodeName.MatchString(name) {
			return fmt.Errorf("node dependency %q: not a valid package name", name)
		}
		if v != "" && !nodeVersion.MatchString(v) {
			return fmt.Errorf("node dependency %q: version %q is not a version range", name, v)
		}
	}
	for _, name := range d.Apt {
		if !aptName.MatchString(name) {
			return fmt.Errorf("apt dependency %q: not a valid package name", name)
		}
	}
	return nil
}

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
