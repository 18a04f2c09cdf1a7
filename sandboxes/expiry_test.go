package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// freezerDriver is the fake engine with a cgroup freezer.
type freezerDriver struct{ *fakeDriver }

func (d freezerDriver) Pause(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.containers[id]
	if c == nil || !c.state.Running {
		return fmt.Errorf("container %s is not running", id)
	}
	c.state.Paused = true
	return nil
}

func (d freezerDriver) Unpause(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.containers[id]; c != nil {
		c.state.Paused = false
	}
	return nil
}

func (d freezerDriver) paused(m *Manager, id string) bool {
	m.mu.RLock()
	cid := m.entries[id].rec.ContainerID
	m.mu.RUnlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.containers[cid]
	return c != nil && c.state.Paused
}

func near(t *time.Time, want time.Time) bool {
	return t != nil && t.Sub(want).Abs() < time.Minute
}

// At its TTL a sandbox created with on_expire pause is frozen, not deleted: its processes' container is paused,
// it reads paused with the retention as its expiry, and a resume gives it its TTL again. Past the retention it is
// deleted like any expired sandbox, so a kept sandbox nobody resumes does not live forever. All of it survives a
// new Manager on the same store (a reload, a killed gateway).
func TestTimeoutPausesKeepsAndBounds(t *testing.T) {
	ctx := context.Background()
	d := freezerDriver{newFakeDriver(t)}
	path := t.TempDir() + "/store.db"
	cfg := Config{Profiles: []Profile{testProfile("a")}, ExpiryRetention: 3 * time.Hour}
	m := startManagerOn(t, d, NewBoltStore(path), cfg)
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour, OnExpire: ExpirePause})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	expireNow(t, m, sb.ID)
	if rep := m.CollectGarbage(ctx); rep.TimeoutKept != 1 || rep.Expired != 0 {
		t.Fatalf("collection at the TTL: %+v, want one kept, none deleted", rep)
	}
	got, err := m.Get(ctx, sb.ID)
	if err != nil || got.Status != StatusPaused || got.ExpiredAt == nil || !near(got.ExpiresAt, time.Now().Add(3*time.Hour)) || !d.paused(m, sb.ID) {
		t.Fatalf("after its TTL: %+v %v (frozen %v), want paused until the retention's end", got, err, d.paused(m, sb.ID))
	}

	// A reload (a new Manager on the same store and engine) keeps the keep.
	m.Close()
	m = startManagerOn(t, d, NewBoltStore(path), cfg)
	got, err = m.Get(ctx, sb.ID)
	if err != nil || got.Status != StatusPaused || got.ExpiredAt == nil || got.OnExpire != ExpirePause {
		t.Fatalf("after a reload: %+v %v", got, err)
	}
	if _, err := m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	got, _ = m.Get(ctx, sb.ID)
	if got.Status != StatusReady || got.ExpiredAt != nil || !near(got.ExpiresAt, time.Now().Add(time.Hour)) || d.paused(m, sb.ID) {
		t.Fatalf("after resume: %+v, want ready with its 1h TTL again", got)
	}

	// Its next timeout keeps it again; past the retention it goes.
	expireNow(t, m, sb.ID)
	if rep := m.CollectGarbage(ctx); rep.TimeoutKept != 1 {
		t.Fatalf("second timeout: %+v", rep)
	}
	expireNow(t, m, sb.ID)
	if rep := m.CollectGarbage(ctx); rep.Expired != 1 {
		t.Fatalf("past the retention: %+v, want it deleted", rep)
	}
	if _, err := m.Get(ctx, sb.ID); err == nil {
		t.Fatalf("after the retention: %v", err)
	}
}

// The pause happens at the TTL, not a collector interval later: the collector's timer fires for it (the interval
// here is an hour).
func TestTimeoutPauseOnTime(t *testing.T) {
	ctx := context.Background()
	d := freezerDriver{newFakeDriver(t)}
	m := startManagerOn(t, d, NewBoltStore(t.TempDir()+"/store.db"), Config{Profiles: []Profile{testProfile("a")}, GCInterval: time.Hour})
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour, OnExpire: ExpirePause})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	if _, err := m.SetTTL(ctx, sb.ID, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got, err := m.Get(ctx, sb.ID)
		return err == nil && got.Status == StatusPaused && got.ExpiredAt != nil
	})
	if _, err := m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get(ctx, sb.ID); !near(got.ExpiresAt, time.Now()) || time.Until(*got.ExpiresAt) > time.Second {
		t.Fatalf("after resume the TTL is %v, want setTimeout's 300ms again", got.ExpiresAt)
	}
}

// on_expire stop stops the container at the TTL (workspace kept); the next request starts it and it lives its TTL
// again.
func TestTimeoutStopKeepsWorkspace(t *testing.T) {
	ctx := context.Background()
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour, OnExpire: ExpireStop})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	expireNow(t, m, sb.ID)
	if rep := m.CollectGarbage(ctx); rep.TimeoutKept != 1 {
		t.Fatalf("collection: %+v", rep)
	}
	got, _ := m.Get(ctx, sb.ID)
	if got.Status != StatusIdle || got.ExpiredAt == nil {
		t.Fatalf("after its TTL: %+v, want idle (stopped) and kept", got)
	}
	if _, vols := d.count(); vols == 0 {
		t.Fatal("the workspace went with the stop")
	}
	mustReady(t, m, sb.ID)
	if got, _ = m.Get(ctx, sb.ID); got.ExpiredAt != nil || !near(got.ExpiresAt, time.Now().Add(time.Hour)) {
		t.Fatalf("after a start: %+v", got)
	}
}

func TestOnExpireRefusals(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	for _, tc := range []struct {
		name string
		req  CreateRequest
		code string
	}{
		{"unknown action", CreateRequest{Profile: "a", TTL: time.Hour, OnExpire: "hibernate"}, CodeInvalid},
		{"no TTL", CreateRequest{Profile: "a", TTL: -1, OnExpire: ExpireStop}, CodeInvalid},
		{"no freezer", CreateRequest{Profile: "a", TTL: time.Hour, OnExpire: ExpirePause}, CodeCapabilityAbsent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Create(ctx, tc.req)
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
	if sbs, _, _ := m.List(ctx, ListOptions{}); len(sbs) != 0 {
		t.Fatalf("a refused create left %d sandboxes", len(sbs))
	}
}

// E2B's timeout is hard: a request held open through the edge (a background command's stream holds a lease) does
// not keep a sandbox from pausing at its TTL; the request waits for the resume.
func TestTimeoutPausesLeasedSandbox(t *testing.T) {
	ctx := context.Background()
	d := freezerDriver{newFakeDriver(t)}
	m := startManagerOn(t, d, NewBoltStore(t.TempDir()+"/store.db"), Config{Profiles: []Profile{testProfile("a")}})
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour, OnExpire: ExpirePause})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	release, err := m.Acquire(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	expireNow(t, m, sb.ID)
	if rep := m.CollectGarbage(ctx); rep.TimeoutKept != 1 || !d.paused(m, sb.ID) {
		t.Fatalf("a leased sandbox at its TTL: %+v, frozen %v", rep, d.paused(m, sb.ID))
	}
}

// A fork keeps what its source's timeout does, where the fork has a timeout.
func TestForkKeepsOnExpire(t *testing.T) {
	ctx := context.Background()
	d := &copyingDriver{fakeDriver: newFakeDriver(t)}
	m := startManagerOn(t, d, NewBoltStore(t.TempDir()+"/store.db"), Config{Profiles: []Profile{testProfile("a")}})
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour, OnExpire: ExpirePause})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	res, err := m.Fork(ctx, sb.ID, ForkRequest{TTL: time.Minute})
	if err != nil || res.Sandbox.OnExpire != ExpirePause {
		t.Fatalf("fork: %+v %v", res, err)
	}
	res, err = m.Fork(ctx, sb.ID, ForkRequest{TTL: -1})
	if err != nil || res.Sandbox.OnExpire != "" {
		t.Fatalf("a fork that never expires: %+v %v", res, err)
	}
}
