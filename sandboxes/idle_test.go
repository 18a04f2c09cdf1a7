package sandboxes

import (
	"context"
	"testing"
	"time"
)

// idleNow puts e's idle deadline in the past, as if it had been left alone for its whole idle timeout.
func idleNow(m *Manager, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	past := time.Now().Add(-time.Second)
	m.entries[id].rec.IdleExpiresAt = &past
}

// A request holding a sandbox keeps it running through a collector pass that finds it past its idle deadline;
// once the request ends, the next pass stops it.
func TestIdleCollectorSparesHeldSandbox(t *testing.T) {
	p := testProfile("a")
	p.IdleTimeout = Duration(time.Hour)
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{p}})
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	reqCtx, endRequest := context.WithCancel(context.Background())
	if _, err := m.Hold(reqCtx, sb.ID); err != nil {
		t.Fatalf("hold: %v", err)
	}
	idleNow(m, sb.ID)
	if rep := m.CollectGarbage(context.Background()); rep.IdleStopped != 0 {
		t.Fatalf("a held sandbox was stopped: %+v", rep)
	}
	if got, _ := m.Get(context.Background(), sb.ID); got.Status != StatusReady {
		t.Fatalf("held sandbox is %s", got.Status)
	}
	endRequest()
	waitFor(t, func() bool {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.entries[sb.ID].leases == 0
	})
	idleNow(m, sb.ID)
	if rep := m.CollectGarbage(context.Background()); rep.IdleStopped != 1 {
		t.Fatalf("a released idle sandbox was not stopped: %+v", rep)
	}
}

// A request arriving while the collector is stopping a sandbox waits for the stop to end and gets a started
// sandbox, never the container being stopped.
func TestHoldDuringIdleStopWaitsAndRestarts(t *testing.T) {
	p := testProfile("a")
	p.IdleTimeout = Duration(time.Hour)
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{p}})
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	gate := make(chan struct{})
	d.mu.Lock()
	d.stopGate = gate
	d.mu.Unlock()
	idleNow(m, sb.ID)
	gc := make(chan GCReport)
	go func() { gc <- m.CollectGarbage(context.Background()) }()
	waitFor(t, func() bool {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.entries[sb.ID].stopping != nil
	})

	type held struct {
		stopsDone int
		running   bool
		err       error
	}
	reqCtx, endRequest := context.WithCancel(context.Background())
	defer endRequest()
	got := make(chan held)
	go func() {
		_, err := m.Hold(reqCtx, sb.ID)
		d.mu.Lock()
		defer d.mu.Unlock()
		c := d.containers[m.entries[sb.ID].rec.ContainerID]
		got <- held{stopsDone: d.stopsDone, running: c != nil && c.state.Running, err: err}
	}()
	close(gate)
	if rep := <-gc; rep.IdleStopped != 1 {
		t.Fatalf("collector: %+v", rep)
	}
	h := <-got
	if h.err != nil {
		t.Fatalf("hold during the stop: %v", h.err)
	}
	if h.stopsDone != 1 || !h.running {
		t.Fatalf("hold returned before the stop ended or on a stopped container: %+v", h)
	}
	if s, _ := m.Get(context.Background(), sb.ID); s.Status != StatusReady {
		t.Fatalf("after the hold the sandbox is %s", s.Status)
	}
}
