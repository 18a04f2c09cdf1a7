package sandboxes

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRestartAdoptsFromTheStore(t *testing.T) {
	p := testProfile("a")
	p.IdleTimeout = Duration(time.Hour)
	cfg := Config{Profiles: []Profile{p}}
	d := newFakeDriver(t)
	path := t.TempDir() + "/store.db"
	m := startTestManager(t, d, path, cfg)
	ctx := context.Background()
	kept, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	lost, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	mustReady(t, m, kept.ID)
	mustReady(t, m, lost.ID)
	before, _ := m.Get(ctx, kept.ID)
	m.mu.RLock()
	keptCID, lostCID := m.entries[kept.ID].rec.ContainerID, m.entries[lost.ID].rec.ContainerID
	m.mu.RUnlock()
	instance := m.Instance()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if c, _ := d.count(); c != 2 {
		t.Fatalf("Close removed containers: %d left", c)
	}
	_ = d.Remove(ctx, lostCID)

	m2 := startTestManager(t, d, path, cfg)
	if m2.Instance() != instance {
		t.Errorf("instance changed across restarts: %s -> %s", instance, m2.Instance())
	}
	waitFor(t, func() bool { g, _ := m2.Get(ctx, kept.ID); return g != nil && g.Status == StatusReady })
	after, _ := m2.Get(ctx, kept.ID)
	if !after.ExpiresAt.Equal(*before.ExpiresAt) || !after.IdleExpiresAt.Equal(*before.IdleExpiresAt) {
		t.Errorf("deadlines changed: %v/%v -> %v/%v", before.ExpiresAt, before.IdleExpiresAt, after.ExpiresAt, after.IdleExpiresAt)
	}
	m2.mu.RLock()
	cid := m2.entries[kept.ID].rec.ContainerID
	m2.mu.RUnlock()
	if cid != keptCID {
		t.Errorf("adopted sandbox has container %s, was %s", cid, keptCID)
	}
	// A container that vanished while the gateway was down is a death: the next use rebuilds it.
	gone, _ := m2.Get(ctx, lost.ID)
	if gone.Status != StatusIdle || gone.Died == nil || gone.Died.Reason != "removed" || !strings.Contains(gone.LastError, "removed") {
		t.Errorf("sandbox whose container vanished: %+v", gone)
	}
	if _, err := m2.EnsureRunning(ctx, lost.ID); ErrorCode(err) != CodeNotReady {
		t.Fatalf("first use of the vanished sandbox: %v", err)
	}
	waitFor(t, func() bool { sb, _ := m2.Get(ctx, lost.ID); return sb.Status == StatusReady })
	mustReady(t, m2, lost.ID)
}

func TestBoltStoreRoundTrip(t *testing.T) {
	s := NewBoltStore(t.TempDir() + "/sub/dir/store.db")
	defer s.Close()
	exp := time.Now().Add(time.Hour).Round(0)
	rec := Record{ID: "sandbox-000000000001", Profile: "a", Token: "t", ExpiresAt: &exp, Phase: PhaseRunning, Generation: 2}
	if err := s.Put(rec); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("instance", "abc"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil || len(got) != 1 || got[0].ID != rec.ID || !got[0].ExpiresAt.Equal(exp) || got[0].Generation != 2 {
		t.Fatalf("load: %+v %v", got, err)
	}
	if v, _ := s.Meta("instance"); v != "abc" {
		t.Errorf("meta %q", v)
	}
	if err := s.Delete(rec.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(); len(got) != 0 {
		t.Errorf("delete left %d", len(got))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
