package drivertest

import (
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

func TestKillReason(t *testing.T) {
	for _, tt := range []struct {
		death sandboxes.Death
		want  bool
	}{
		{sandboxes.Death{Reason: "sigkill", ExitCode: 137}, true},
		{sandboxes.Death{Reason: "exit", ExitCode: 1}, true},
		{sandboxes.Death{Reason: "exit", ExitCode: 255}, true},
		{sandboxes.Death{Reason: "exit", ExitCode: 0}, false},    // a clean exit is no kill
		{sandboxes.Death{Reason: "sigkill", ExitCode: 0}, false}, // a reason its exit code contradicts
		{sandboxes.Death{Reason: "oom", ExitCode: 137}, false},   // a kill from outside is not the OOM killer
		{sandboxes.Death{Reason: "removed", ExitCode: -1}, false},
		{sandboxes.Death{Reason: "sigterm", ExitCode: 143}, false},
	} {
		if got := killReason(&tt.death); got != tt.want {
			t.Errorf("killReason(%+v) = %v, want %v", tt.death, got, tt.want)
		}
	}
}
