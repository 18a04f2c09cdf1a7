package service

import (
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// Bay lists a sandbox's containers only while its session runs: every status whose container is not running
// answers null, on GET-one too.
func TestDescribeListsContainersOnlyWhenRunning(t *testing.T) {
	for _, tc := range []struct {
		status sandboxes.Status
		want   bool
	}{
		{sandboxes.StatusReady, true},
		{sandboxes.StatusStarting, false},
		{sandboxes.StatusIdle, false},
		{sandboxes.StatusPaused, false},
		{sandboxes.StatusFailed, false},
		{sandboxes.StatusExpired, false},
	} {
		v := Describe(sandboxes.Sandbox{ID: "sb", Status: tc.status}, "1.2.3", true)
		if got := v.Containers != nil; got != tc.want {
			t.Errorf("%s: containers %v, want listed=%v", tc.status, v.Containers, tc.want)
		}
		if tc.want && v.Containers[0].Version != "1.2.3" {
			t.Errorf("%s: container version %q", tc.status, v.Containers[0].Version)
		}
		if v := Describe(sandboxes.Sandbox{ID: "sb", Status: tc.status}, "1.2.3", false); v.Containers != nil {
			t.Errorf("%s: containers listed without being asked for", tc.status)
		}
	}
}
