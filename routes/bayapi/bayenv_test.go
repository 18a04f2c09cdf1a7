package bayapi

import (
	"slices"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestProfilesFor: BAY_PROFILES replace or add to the configured profiles, and only a gateway with none at all
// gets Bay's python-default.
func TestProfilesFor(t *testing.T) {
	conf := sandboxes.Profile{ID: "mine", Image: "img"}
	envSame := sandboxes.Profile{ID: "mine", Image: "from-env"}
	envNew := sandboxes.Profile{ID: "extra", Image: "img"}
	for _, tc := range []struct {
		name       string
		configured []sandboxes.Profile
		env        []sandboxes.Profile
		want       []string // id=image
	}{
		{"nothing: Bay's default", nil, nil, []string{DefaultProfile + "=" + SandgateBaseImage}},
		{"configured only", []sandboxes.Profile{conf}, nil, []string{"mine=img"}},
		{"environment only", nil, []sandboxes.Profile{envNew}, []string{"extra=img"}},
		{"environment replaces by id and adds", []sandboxes.Profile{conf}, []sandboxes.Profile{envSame, envNew}, []string{"mine=from-env", "extra=img"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := BayEnv{Profiles: tc.env}.ProfilesFor(tc.configured)
			var ids []string
			for _, p := range got {
				ids = append(ids, p.ID+"="+p.Image)
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("profiles %v, want %v", ids, tc.want)
			}
		})
	}
	p := PythonDefault()
	if p.IdleTimeout.Std() != 30*time.Minute || p.Resources.CPUs != 1 || p.Resources.Memory != "1g" ||
		!p.HasCapability(sandboxes.CapPython) || !p.HasCapability(sandboxes.CapShell) || !p.HasCapability(sandboxes.CapFilesystem) {
		t.Fatalf("python-default: %+v", p)
	}
}
