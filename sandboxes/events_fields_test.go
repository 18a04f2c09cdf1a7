package sandboxes

import (
	"reflect"
	"testing"
	"time"
)

func TestEventFields(t *testing.T) {
	base := map[string]any{"sandbox_id": "sb-1", "profile": "base", "owner": "alice", "reason": "", "launch_type": "create", "warm": false}
	ev := Event{Type: EventReady, SandboxID: "sb-1", Profile: "base", Owner: "alice", LaunchType: "create"}
	if got := ev.Fields(); !reflect.DeepEqual(got, base) {
		t.Errorf("ready without a duration: %v", got)
	}
	ev.Duration = 1500 * time.Millisecond
	if got := ev.Fields()["duration_seconds"]; got != 1.5 {
		t.Errorf("duration_seconds %v", got)
	}
	died := Event{Type: EventDied, SandboxID: "sb-1", Death: &Death{ExitCode: 137, Message: "OOM killed"}}
	if f := died.Fields(); f["exit_code"] != 137 || f["message"] != "OOM killed" {
		t.Errorf("died: %v", f)
	}
}
