package bayapi

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// TestGCAnswer maps one collection's report onto Bay's per-task answer, with and without named tasks.
func TestGCAnswer(t *testing.T) {
	rep := sandboxes.GCReport{IdleStopped: 1, IdlePaused: 1, Expired: 3, OrphanVolumes: 4, OrphanContainers: 5, WarmRecycled: 6, Errors: 2,
		Failures: []sandboxes.GCFailure{{Task: sandboxes.GCOrphanVolumes, Err: "removing orphan volume: in use"}, {Task: sandboxes.GCIdle, Err: "stopping: gone"}}}
	type row struct {
		name            string
		cleaned, errors int
	}
	tests := []struct {
		name         string
		named        []string
		want         []row
		cleaned, err int
	}{
		{"all tasks", nil, []row{{"idle_session", 2, 1}, {"expired_sandbox", 3, 0}, {"orphan_cargo", 4, 1}, {"orphan_container", 5, 0}, {"warm_pool", 6, 0}}, 20, 2},
		{"Bay's idle_session only", []string{"idle_session"}, []row{{"idle_session", 2, 1}}, 2, 1},
		{"unknown names ignored", []string{"orphan_cargo", "nope"}, []row{{"orphan_cargo", 4, 1}}, 4, 1},
		{"Bay's older name orphan_workspace selects orphan_cargo", []string{"orphan_workspace"}, []row{{"orphan_cargo", 4, 1}}, 4, 1},
		{"Bay's test selection", []string{"orphan_cargo"}, []row{{"orphan_cargo", 4, 1}}, 4, 1},
		{"an empty list keeps none", []string{}, nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := gcAnswer(rep, tc.named, 0)
			var got []row
			for _, r := range out.Results {
				if r.Errors == nil {
					t.Errorf("%s: errors must be a list, not null", r.TaskName)
				}
				got = append(got, row{r.TaskName, r.CleanedCount, len(r.Errors)})
			}
			if !reflect.DeepEqual(got, tc.want) || out.TotalCleaned != tc.cleaned || out.TotalErrors != tc.err || out.Results == nil {
				t.Fatalf("got %+v (cleaned %d, errors %d), want %+v (%d, %d)", got, out.TotalCleaned, out.TotalErrors, tc.want, tc.cleaned, tc.err)
			}
		})
	}
}

// gcAPI is newTestAPI on the whole Manager (instance i-1, collecting every 90s) with something to collect: alice's
// sandbox past its idle timeout and two orphan workspace volumes.
type gcAPI struct {
	*testAPI
	idle    string
	orphans []string
}

func newGCAPI(t *testing.T) *gcAPI {
	t.Helper()
	g := &gcAPI{testAPI: newTestAPI(t, func(c *testConfig) {
		c.core.GCInterval, c.mcfg.Instance, c.whole = 90*time.Second, "i-1", true
	})}
	sb, err := g.mgr.Create(context.Background(), sandboxes.CreateRequest{Owner: "alice", Profile: "python-default"})
	if err != nil {
		t.Fatal(err)
	}
	sandboxestest.WaitStatus(t, g.mgr, sb.ID, sandboxes.StatusReady)
	g.idle = sb.ID
	g.orphans = []string{g.engine.LeaveOrphanWorkspace(g.mgr), g.engine.LeaveOrphanWorkspace(g.mgr)}
	g.clock.Advance(31 * time.Minute) // past python-default's idle timeout
	return g
}

// collected says whether a collection ran: the idle sandbox was stopped and the orphans removed.
func (g *gcAPI) collected(t *testing.T) bool {
	t.Helper()
	sb, err := g.mgr.Get(context.Background(), g.idle)
	if err != nil {
		t.Fatal(err)
	}
	gone := !g.engine.HasVolume(g.orphans[0]) && !g.engine.HasVolume(g.orphans[1])
	if stopped := sb.Status == sandboxes.StatusIdle; stopped != gone {
		t.Fatalf("half a collection: sandbox %s, orphans gone %v", sb.Status, gone)
	}
	return gone
}

// TestAdminGCRoute: a tenant's key is refused with Bay's 403 and runs nothing; an admin's runs one collection and
// gets Bay's answer; a backend without the collector answers capability_not_supported; a bad body is Bay's 422.
// The collection is the real Manager's: it stops the idle sandbox and removes the two orphan volumes.
func TestAdminGCRoute(t *testing.T) {
	a := newGCAPI(t)
	if st, out, _ := a.call(t, "POST", "/v1/admin/gc/run", keyAlice, map[string]any{}); st != 403 || errCode(out) != "forbidden" || a.collected(t) {
		t.Fatalf("tenant: %d %v, collected %v", st, out, a.collected(t))
	}
	if st, out, _ := a.call(t, "POST", "/v1/admin/gc/run", keyAdmin, map[string]any{"tasks": "idle_session"}); st != 422 || out["detail"] == nil || a.collected(t) {
		t.Fatalf("bad tasks: %d %v", st, out)
	}
	st, out, _ := a.call(t, "POST", "/v1/admin/gc/run", keyAdmin, map[string]any{"tasks": []string{"idle_session", "orphan_cargo"}})
	if st != 200 || !a.collected(t) || out["total_cleaned"] != 3.0 || out["total_errors"] != 0.0 || len(out["results"].([]any)) != 2 {
		t.Fatalf("admin: %d %v, collected %v", st, out, a.collected(t))
	}
	if _, ok := out["duration_ms"].(float64); !ok {
		t.Errorf("duration_ms missing: %v", out)
	}
	// No body at all, as Bay's client may send: every task.
	if st, out, _ := a.call(t, "POST", "/v1/admin/gc/run", keyAdmin, nil); st != 200 || len(out["results"].([]any)) != len(gcTasks) {
		t.Fatalf("no body: %d %v", st, out)
	}
	b := newTestAPI(t) // lifecycleOnly: no collector
	if st, out, _ := b.call(t, "POST", "/v1/admin/gc/run", keyAdmin, nil); st != 400 || errCode(out) != "capability_not_supported" {
		t.Fatalf("no collector: %d %v", st, out)
	}
}

// TestAdminGCStatusRoute: Bay's GET /v1/admin/gc/status answers the collector's state in Bay's shape for an admin
// key, refuses a tenant's key with 403, and on a fleet gateway without the GC lease shows only warm_pool enabled.
// The state is the real Manager's while a collection is under way (its stop of the idle sandbox held).
func TestAdminGCStatusRoute(t *testing.T) {
	a := newGCAPI(t)
	release := a.engine.BlockStops(t)
	done := make(chan error, 1)
	go func() { _, err := a.mgr.RunGC(context.Background()); done <- err }()
	sandboxestest.WaitFor(t, "a collection under way", func() bool { return a.mgr.GCState().Running })
	if st, out, _ := a.call(t, "GET", "/v1/admin/gc/status", keyAlice, nil); st != 403 || errCode(out) != "forbidden" {
		t.Fatalf("tenant: %d %v", st, out)
	}
	st, out, _ := a.call(t, "GET", "/v1/admin/gc/status", keyAdmin, nil)
	want := map[string]any{"enabled": true, "is_running": true, "instance_id": "i-1", "interval_seconds": 90.0,
		"tasks": map[string]any{"idle_session": map[string]any{"enabled": true}, "expired_sandbox": map[string]any{"enabled": true},
			"orphan_cargo": map[string]any{"enabled": true}, "orphan_container": map[string]any{"enabled": true}, "warm_pool": map[string]any{"enabled": true}}}
	if st != 200 || !reflect.DeepEqual(out, want) {
		t.Fatalf("admin: %d %v", st, out)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := gcStatusAnswer(sandboxes.GCState{Leader: false}).Tasks; got["idle_session"]["enabled"] || !got["warm_pool"]["enabled"] {
		t.Errorf("not the lease holder: %v", got)
	}
	b := newTestAPI(t) // lifecycleOnly: no collector
	if st, out, _ := b.call(t, "GET", "/v1/admin/gc/status", keyAdmin, nil); st != 400 || errCode(out) != "capability_not_supported" {
		t.Fatalf("no collector: %d %v", st, out)
	}
}
