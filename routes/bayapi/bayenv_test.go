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

// TestParseBayProfilesShip: a BAY_PROFILES profile may carry Ship's conventions (user, home, env_file,
// host_aliases); one without them keeps our defaults, and a bad value is refused with the profile's position.
func TestParseBayProfilesShip(t *testing.T) {
	got, err := ParseBayProfiles([]byte(`[
		{"id":"browser-python","containers":[{"name":"ship","image":"ship:latest","runtime_type":"ship","capabilities":["python","shell","filesystem"],"env":{"API_KEY":"k"}},
			{"name":"gull","image":"gull:latest","runtime_type":"gull","capabilities":["browser"]}],
		 "user":{"name":"shipyard","uid":1000},"home":"/workspace","env_file":"/workspace/.bay_env.sh","host_aliases":["ship"]},
		{"id":"python-default","image":"ship:latest"}]`))
	if err != nil {
		t.Fatal(err)
	}
	ship, plain := got[0], got[1]
	if ship.User == nil || *ship.User != (sandboxes.SandboxUser{Name: "shipyard", UID: 1000}) || ship.Home != "/workspace" ||
		ship.EnvFile != "/workspace/.bay_env.sh" || !slices.Equal(ship.HostAliases, []string{"ship", "gull"}) || ship.Image != SandgateBrowserImage {
		t.Errorf("Ship's options: %+v", ship)
	}
	if plain.User != nil || plain.Home != "" || plain.EnvFile != "" || plain.HostAliases != nil {
		t.Errorf("a profile without them changed: %+v", plain)
	}
	// A multi-container profile's container names are aliases of the one sandbox (Gull reaches Ship as `ship`),
	// without the Ship options; names that are no DNS label are left out.
	got, err = ParseBayProfiles([]byte(`[{"id":"browser-python","containers":[
		{"name":"ship","image":"ship:latest","runtime_type":"ship","capabilities":["python","shell","filesystem"]},
		{"name":"gull","image":"gull:latest","runtime_type":"gull","capabilities":["browser"]},
		{"name":"Not A Label","image":"x","capabilities":["shell"]}]}]`))
	if err != nil || !slices.Equal(got[0].HostAliases, []string{"ship", "gull"}) || got[0].User != nil {
		t.Errorf("multi-container aliases: %+v %v", got, err)
	}
	if _, err := ParseBayProfiles([]byte(`[{"id":"p","image":"ship:latest","user":{"name":"root","uid":0}}]`)); err == nil {
		t.Errorf("a root user was accepted")
	}
}
