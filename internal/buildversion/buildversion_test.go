package buildversion

import (
	"regexp"
	"runtime/debug"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v2.0.0-rc.1", "2.0.0-rc.1"},
		{"v0.0.0-20261124021229-9c33159abcde", "0.0.0-dev.9c33159abcde"},
		{"v1.4.3-0.20261124021229-9c33159abcde", "0.0.0-dev.9c33159abcde"},
		{"v0.0.0-20261124021229-9c33159abcde+dirty", "0.0.0-dev.9c33159abcde.dirty"},
		{"9c33159", "0.0.0-dev.9c33159"},
		{"9c33159-dirty", "0.0.0-dev.9c33159.dirty"},
		{"v1.2.3-4-g9c33159", "0.0.0-dev.9c33159"},
		{"v1.2.3-4-g9c33159-dirty", "0.0.0-dev.9c33159.dirty"},
		{"012345678901", "0.0.0-dev.g012345678901"},
		{"", Dev},
		{"dev", Dev},
		{"(devel)", Dev},
		{"dev-9c33159abcde", Dev},
		{"not a version", Dev},
	}
	for _, tc := range tests {
		got := Normalize(tc.in)
		if got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !IsSemver(got) {
			t.Errorf("Normalize(%q) = %q is not a semantic version", tc.in, got)
		}
		if !bayVersion.MatchString(got) {
			t.Errorf("Normalize(%q) = %q does not match Bay's version pattern", tc.in, got)
		}
	}
}

// bayVersion is the pattern Shipyard Neo's integration tests check Bay's and Ship's versions with (no build metadata).
var bayVersion = regexp.MustCompile(`^\d+\.\d+\.\d+(-[a-zA-Z0-9.]+)?$`)

func TestFromBuildInfo(t *testing.T) {
	const mod = "github.com/sandgate/sandgate"
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"nil", nil, Dev},
		{"tagged dependency", &debug.BuildInfo{Main: debug.Module{Path: "caddy"}, Deps: []*debug.Module{{Path: mod, Version: "v1.5.0"}}}, "1.5.0"},
		{"replaced dependency", &debug.BuildInfo{Main: debug.Module{Path: "caddy"}, Deps: []*debug.Module{{Path: mod, Version: "v0.0.0", Replace: &debug.Module{Path: "/src"}}}}, Dev},
		{"main module at a revision", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "9c33159abcdef0123456789abcdef0123456789a"}, {Key: "vcs.modified", Value: "true"}}}, "0.0.0-dev.9c33159abcde.dirty"},
		{"main module pseudo-version", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.0.0-20261124021229-9c33159abcde"}}, "0.0.0-dev.9c33159abcde"},
	}
	for _, tc := range tests {
		if got := FromBuildInfo(tc.info, mod); got != tc.want || !IsSemver(got) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"v1.2.3", "9c33159-dirty", "", "dev", "v0.0.0-20261124021229-9c33159abcde", "v1.2.3-4-gabc1234"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := Normalize(s); !IsSemver(got) {
			t.Fatalf("Normalize(%q) = %q", s, got)
		}
	})
}

// TestOf: a stamped version wins (normalised); without one the binary's build info still gives a version.
func TestOf(t *testing.T) {
	if got := Of("v1.2.3", "example.com/m"); got != Normalize("v1.2.3") {
		t.Errorf("stamped: %q", got)
	}
	if got := Of("", "example.com/m"); got == "" || got == "dev" {
		t.Errorf("unstamped: %q", got)
	}
}
