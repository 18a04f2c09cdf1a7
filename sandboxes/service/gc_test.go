package service

import (
	"context"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestCollectGarbageIsAdminOnly: a tenant's call is refused with forbidden and never reaches the collector; an
// admin's runs it once and gets the Manager's report. The collector has work: two sandboxes past their idle
// deadline and an orphan workspace volume; what it did shows in the Manager's and the engine's state.
func TestCollectGarbageIsAdminOnly(t *testing.T) {
	ctx := context.Background()
	svc, b, _ := newTestService(t)
	idle := []string{b.make(t, "alice", "web", 0), b.make(t, "bob", "web", 0)}
	for _, id := range idle {
		if _, err := b.m.EnsureRunning(ctx, id); err != nil { // started, with no lease: idle from now
			t.Fatal(err)
		}
	}
	orphan := b.engine.LeaveOrphanWorkspace(b.m)
	b.clock.Advance(11 * time.Minute) // past the web profile's idle timeout
	untouched := func() {
		t.Helper()
		for _, id := range idle {
			if st := b.status(t, id); st != sandboxes.StatusReady {
				t.Fatalf("the idle sandbox %s was collected: %s", id, st)
			}
		}
	}
	if _, err := svc.CollectGarbage(ctx, Principal{Owner: "alice"}); AsError(err).Code != CodeForbidden {
		t.Fatalf("tenant: got %v, want forbidden", err)
	}
	untouched()
	if !b.engine.HasVolume(orphan) {
		t.Fatalf("a tenant's call ran the collector: the orphan volume is gone")
	}
	rep, err := svc.CollectGarbage(ctx, Principal{Owner: "ops", Admin: true})
	if err != nil || rep.IdleStopped != 2 || rep.OrphanVolumes != 1 {
		t.Fatalf("admin: %+v %v", rep, err)
	}
	for _, id := range idle {
		if st := b.status(t, id); st != sandboxes.StatusIdle {
			t.Errorf("after the admin's collection %s reads %s, want idle", id, st)
		}
	}
	if b.engine.HasVolume(orphan) {
		t.Errorf("the orphan volume outlived the collection")
	}
}
