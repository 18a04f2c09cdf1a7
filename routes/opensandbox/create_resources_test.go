package opensandbox

import (
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestDiskCapsTheWorkspace: resourceLimits.disk becomes the workspace's size limit (at least the minimum), held to
// the profile's workspace_size: at or above it the profile's own applies (so a warm member can still be claimed),
// and under an unlimited profile any figure is a limit.
func TestDiskCapsTheWorkspace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disk    string
		ceiling string
		want    string
	}{
		{"under the profile's", "1Gi", "2g", "1073741824"},
		{"at the profile's", "2Gi", "2g", ""},
		{"above the profile's", "5Gi", "2g", ""},
		{"unlimited profile", "5Gi", "", "5368709120"},
		{"raised to the minimum", "1Mi", "", "16777216"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, e := checkResources(map[string]string{"disk": tc.disk, "cpu": "1"}, "resourceLimits")
			if e != nil {
				t.Fatal(e)
			}
			got := clampResources(res, sandboxes.Resources{CPUs: 1, Memory: "1g", WorkspaceSize: tc.ceiling})
			if got.WorkspaceSize != tc.want {
				t.Fatalf("workspace size %q, want %q", got.WorkspaceSize, tc.want)
			}
		})
	}
	if _, e := checkResources(map[string]string{"disk": "lots"}, "resourceLimits"); e == nil {
		t.Fatal("an unparsable disk was taken")
	}
}
