package service

import (
	"context"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestCollectGarbageIsAdminOnly: a tenant's call is refused with forbidden and never reaches the collector; an
// admin's runs it once and gets the Manager's report.
func TestCollectGarbageIsAdminOnly(t *testing.T) {
	ctx := context.Background()
	svc, sbs, _ := newTestService()
	sbs.GC = sandboxes.GCReport{IdleStopped: 2, OrphanVolumes: 1}
	if _, err := svc.CollectGarbage(ctx, Principal{Owner: "alice"}); AsError(err).Code != CodeForbidden {
		t.Fatalf("tenant: got %v, want forbidden", err)
	}
	if sbs.GCRuns() != 0 {
		t.Fatalf("a tenant's call ran the collector")
	}
	rep, err := svc.CollectGarbage(ctx, Principal{Owner: "ops", Admin: true})
	if err != nil || rep.IdleStopped != 2 || rep.OrphanVolumes != 1 || sbs.GCRuns() != 1 {
		t.Fatalf("admin: %+v %v, %d runs", rep, err, sbs.GCRuns())
	}
}
