// Package buildversion turns what a build knows about itself into the semantic version /health and the agents
// report: a release tag ("1.4.2"), or "0.0.0-dev.<commit>" for anything built from an untagged commit, never a bare
// "dev". Clients compare versions (Bay's SDK and AstrBot log and parse them), so the form is always
// MAJOR.MINOR.PATCH with an optional pre-release. The commit is a pre-release identifier, not build metadata
// ("+<commit>"): Bay's own tests match versions with ^\d+\.\d+\.\d+(-[a-zA-Z0-9.]+)?$, which has no "+".
package buildversion

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// Dev is the version of a build that knows nothing about its source.
const Dev = "0.0.0-dev"

var (
	semverPattern = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
	// A Go pseudo-version (v0.0.0-20260101120000-abcdef123456, also vX.Y.(Z+1)-0.2026...-hash): an untagged commit.
	pseudoPattern = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(?:[0-9A-Za-z.]*\.)?(?:0\.)?[0-9]{14}-([0-9a-f]{12})(\+dirty)?$`)
	// `git describe --always --dirty` output: a tag with commits after it (v1.2.3-4-gabcdef0), or a bare hash.
	describePattern = regexp.MustCompile(`^(?:.*-[0-9]+-g)?([0-9a-f]{7,40})(-dirty)?$`)
)

// IsSemver reports whether v is a semantic version (without a leading "v").
func IsSemver(v string) bool { return !strings.HasPrefix(v, "v") && semverPattern.MatchString(v) }

// Normalize turns a version string as builds produce it into a semantic version: "v1.2.3" is "1.2.3", a Go
// pseudo-version or `git describe` output of an untagged commit is "0.0.0-dev.<hash>" (".dirty" when the tree had
// changes), and "", "dev" or "(devel)" is Dev.
func Normalize(v string) string {
	v = strings.TrimSpace(v)
	if m := pseudoPattern.FindStringSubmatch(v); m != nil {
		return dev(m[1], m[2] != "")
	}
	if m := describePattern.FindStringSubmatch(v); m != nil {
		return dev(m[1], m[2] != "")
	}
	if semverPattern.MatchString(v) {
		return strings.TrimPrefix(v, "v")
	}
	return Dev
}

func dev(hash string, dirty bool) string {
	if len(hash) > 12 {
		hash = hash[:12]
	}
	// A pre-release identifier of digits only may not start with 0 (semver 2.0.0, item 9); one hash in a few
	// hundred is all digits, and those get git describe's "g" in front.
	if strings.Trim(hash, "0123456789") == "" {
		hash = "g" + hash
	}
	v := Dev + "." + hash
	if dirty {
		v += ".dirty"
	}
	return v
}

// FromBuildInfo is the version of module in this binary: the version it was required at (a tag when xcaddy or a
// go.mod pinned a release), else the VCS revision the main module was built from, else Dev.
func FromBuildInfo(info *debug.BuildInfo, module string) string {
	if info == nil {
		return Dev
	}
	version := ""
	if info.Main.Path == module {
		version = info.Main.Version
	} else {
		for _, dep := range info.Deps {
			if dep.Path == module {
				version = dep.Version
				if dep.Replace != nil && dep.Replace.Version != "" {
					version = dep.Replace.Version
				}
			}
		}
	}
	if version != "" && version != "(devel)" && version != "v0.0.0" {
		return Normalize(version)
	}
	var revision string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if revision != "" {
		return dev(revision, dirty)
	}
	return Dev
}

// Of is the semantic version of module in this binary: stamped, the version the build scripts set with -ldflags
// -X, else the module version when xcaddy built it as a dependency, else 0.0.0-dev.<revision> of a plain
// `go build`. Never "dev".
func Of(stamped, module string) string {
	if stamped != "" {
		return Normalize(stamped)
	}
	info, _ := debug.ReadBuildInfo()
	return FromBuildInfo(info, module)
}
