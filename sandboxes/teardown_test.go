package sandboxes

import (
	"context"
	"testing"
	"time"
)

func TestStopDuringStartEndsIdle(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	d.startDelay = 300 * time.Millisecond
	sb, _ := m.Create(context.Background(), CreateRequest{Profile: "a"})
	time.Sleep(50 * time.Millisecond)
	if err := m.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Get(context.Background(), sb.ID)
	if got.Status != StatusIdle {
		t.Fatalf("status after stopping a starting sandbox: %+v", got)
	}
	d.startDelay = 0
	mustReady(t, m, sb.ID)
}

// TestDeleteOutlivesItsCaller: a client that gives up during a delete (its request's context cancelled) still gets
// the container, the workspace volume and the record removed. The sandbox leaves every index before the engine
// calls, so nothing retries them later: on the old code the cancelled calls left the volume behind (the soak,
// bench/soak_test.go, found it at the end of a run).
func TestDeleteOutlivesItsCaller(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	d.honourCancel = true
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is gone before the engine calls
	if err := m.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("delete with the caller gone: %v", err)
	}
	d.mu.Lock()
	containers, volumes := len(d.containers), len(d.volumes)
	d.mu.Unlock()
	if containers != 0 || volumes != 0 {
		t.Fatalf("after the delete: %d containers and %d volumes left", containers, volumes)
	}
	if recs, err := m.store.Load(); err != nil || len(recs) != 0 {
		t.Fatalf("records left in the store: %d %v", len(recs), err)
	}
}
