package sandboxes

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

func TestWorkspaceSizeValidate(t *testing.T) {
	for _, tc := range []struct {
		size, want string
	}{
		{"", ""},
		{"64m", ""},
		{"16m", ""},
		{"2g", ""},
		{"8m", "below the minimum"},
		{"lots", "workspace_size"},
		{"-1g", "workspace_size"},
	} {
		p := testProfile("p")
		p.Resources.WorkspaceSize = tc.size
		cfg := Config{Profiles: []Profile{p}}
		err := cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("workspace_size %q: %v, want %q", tc.size, err, tc.want)
		}
	}
}

func TestWorkspaceSizeLowered(t *testing.T) {
	for _, tc := range []struct {
		name            string
		ceiling, want   string
		got, wantErrSub string
	}{
		{"unset keeps the profile's", "1g", "", "1g", ""},
		{"lower under a cap", "1g", "256m", "256m", ""},
		{"above the cap", "1g", "2g", "", "above the profile's 1g"},
		{"any under an unlimited profile", "", "5g", "5g", ""},
		{"below the minimum", "", "1m", "", "below the minimum"},
		{"unparsable", "", "big", "", "workspace_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := lowerResources(Resources{WorkspaceSize: tc.ceiling}, Resources{WorkspaceSize: tc.want})
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("%v, want %q", err, tc.wantErrSub)
				}
				return
			}
			if err != nil || out.WorkspaceSize != tc.got {
				t.Fatalf("%+v %v, want %q", out, err, tc.got)
			}
		})
	}
}

func TestWorkspaceSizeOf(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   int64
	}{
		{nil, 0},
		{map[string]string{"sg.workspace": "ws-1"}, 0},
		{map[string]string{"sg.workspace_size": "67108864"}, 64 << 20},
		{map[string]string{"workspace_size": "1024"}, 1024},
		{map[string]string{"sg.workspace_size": "-5"}, 0},
		{map[string]string{"sg.workspace_size": "1g"}, 0},
		{map[string]string{"sg.not_workspace_size_really": "5"}, 0},
	} {
		if got := WorkspaceSizeOf(tc.labels); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.labels, got, tc.want)
		}
	}
}

// TestWorkspaceSizeReachesTheDriver: the volume of a sandbox of a profile with workspace_size, of a create that
// lowers it, and of Bay's cargo (size_limit_mb, raised to the minimum) carry the size the driver caps them at; an
// unlimited profile's carries none.
func TestWorkspaceSizeReachesTheDriver(t *testing.T) {
	capped := testProfile("capped")
	capped.Resources.WorkspaceSize = "1g"
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{capped, testProfile("open")}})
	ctx := context.Background()
	sizeOf := func(ws string) string {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.volumes[m.VolumeName(ws)].Labels["unit."+LabelWorkspaceSize]
	}
	for _, tc := range []struct {
		profile string
		res     Resources
		want    string
	}{
		{"capped", Resources{}, strconv.Itoa(1 << 30)},
		{"capped", Resources{WorkspaceSize: "128m"}, strconv.Itoa(128 << 20)},
		{"open", Resources{}, ""},
	} {
		sb, err := m.Create(ctx, CreateRequest{Profile: tc.profile, Owner: "o", Resources: tc.res})
		if err != nil {
			t.Fatal(err)
		}
		mustReady(t, m, sb.ID)
		if got := sizeOf(sb.WorkspaceID); got != tc.want {
			t.Errorf("%s %+v: volume size label %q, want %q", tc.profile, tc.res, got, tc.want)
		}
	}
	for _, tc := range []struct {
		mb   int
		want string
	}{{512, strconv.Itoa(512 << 20)}, {1, strconv.Itoa(MinWorkspaceSize)}, {0, ""}} {
		w, err := m.CreateWorkspace(ctx, WorkspaceSpec{Owner: "o", SizeLimitMB: tc.mb, Backend: "docker_volume"})
		if err != nil {
			t.Fatal(err)
		}
		if got := sizeOf(w.ID); got != tc.want {
			t.Errorf("cargo of %d MB: volume size label %q, want %q", tc.mb, got, tc.want)
		}
	}
}
