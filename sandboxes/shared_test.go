package sandboxes

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeShared is a SharedStore for unit tests: a local BoltStore whose "other gateways" are the test, handing
// changes in through changes, and whose GC lease is a flag.
type fakeShared struct {
	*BoltStore
	id      string
	leading atomic.Bool
	changes chan RecordChange
	mu      sync.Mutex
	fresh   []Record // what Fresh answers beside the local records (another gateway's writes)
}

func newFakeShared(t *testing.T, leading bool) *fakeShared {
	s := &fakeShared{BoltStore: NewBoltStore(t.TempDir() + "/store.db"), id: "gw-a", changes: make(chan RecordChange)}
	s.leading.Store(leading)
	return s
}

func (s *fakeShared) Identity() string { return s.id }
func (s *fakeShared) Leading() bool    { return s.leading.Load() }
func (s *fakeShared) InitMeta(key, value string) (string, error) {
	if v, err := s.Meta(key); err != nil || v != "" {
		return v, err
	}
	return value, s.SetMeta(key, value)
}
func (s *fakeShared) Follow(ctx context.Context, apply func(RecordChange)) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-s.changes:
			apply(c)
		}
	}
}
func (s *fakeShared) Fresh(context.Context) ([]Record, error) {
	recs, err := s.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(recs, s.fresh...), err
}

// send hands a change to the Manager; Follow applies one change at a time, so once the next send (or the
// barrier) is taken, this one is applied.
func (s *fakeShared) send(t *testing.T, c RecordChange) {
	t.Helper()
	select {
	case s.changes <- c:
	case <-time.After(10 * time.Second):
		t.Fatal("the manager does not follow the shared store")
	}
	// A no-op change as a barrier: taken only after the one before was applied.
	select {
	case s.changes <- RecordChange{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the manager does not follow the shared store")
	}
}

func startSharedManager(t *testing.T, d *fakeDriver, st *fakeShared, cfg Config) *Manager {
	t.Helper()
	return startManagerOn(t, d, st, cfg)
}

// remoteRecord is a record as another gateway writes it for a running sandbox.
func remoteRecord(id string, phase Phase) Record {
	p := testProfile("base")
	idle := time.Now().Add(time.Hour)
	return Record{ID: id, Profile: "base", ProfileHash: p.Hash(), Owner: "alice", ContainerID: "remote-" + id, WorkspaceID: "ws-" + id,
		ManagedWorkspace: true, Token: "tok-" + id, CreatedAt: time.Now(), Phase: phase, Generation: 1, Addr: "10.0.0.9:7777",
		IdleExpiresAt: &idle, Spec: &p}
}

func TestApplyRemote(t *testing.T) {
	later := time.Now().Add(2 * time.Hour)
	cases := []struct {
		name string
		// local prepares this gateway's own state before the change; changes are what other gateways did.
		local   func(t *testing.T, m *Manager) string
		changes func(id string) []RecordChange
		check   func(t *testing.T, m *Manager, d *fakeDriver, id string)
	}{
		{
			name: "added running is usable at its recorded address",
			changes: func(id string) []RecordChange {
				return []RecordChange{{ID: id, Record: remoteRecord(id, PhaseRunning)}}
			},
			check: func(t *testing.T, m *Manager, _ *fakeDriver, id string) {
				tg, ok := m.Resolve(id)
				if !ok || tg.Addr != "10.0.0.9:7777" || tg.Token != "tok-"+id {
					t.Fatalf("resolve %s: %+v %v", id, tg, ok)
				}
				list, _, err := m.List(context.Background(), ListOptions{})
				if err != nil || len(list) != 1 || list[0].ID != id {
					t.Fatalf("list: %v %v", list, err)
				}
				wantSource(t, m, netip.MustParseAddr("10.0.0.9"), id) // the egress proxy finds it too
			},
		},
		{
			name: "changed elsewhere: stopped",
			changes: func(id string) []RecordChange {
				stopped := remoteRecord(id, PhaseStopped)
				stopped.Addr, stopped.IdleExpiresAt = "", nil
				return []RecordChange{{ID: id, Record: remoteRecord(id, PhaseRunning)}, {ID: id, Record: stopped}}
			},
			check: func(t *testing.T, m *Manager, _ *fakeDriver, id string) {
				if _, ok := m.Resolve(id); ok {
					t.Fatal("a sandbox stopped elsewhere still resolves")
				}
				wantSource(t, m, netip.MustParseAddr("10.0.0.9"), "")
				if sb, err := m.Get(context.Background(), id); err != nil || sb.Status != StatusIdle {
					t.Fatalf("get: %+v %v", sb, err)
				}
			},
		},
		{
			name: "deleted elsewhere leaves memory without an engine call",
			changes: func(id string) []RecordChange {
				return []RecordChange{{ID: id, Record: remoteRecord(id, PhaseRunning)}, {ID: id, Deleted: true}}
			},
			check: func(t *testing.T, m *Manager, d *fakeDriver, id string) {
				if m.Exists(id) {
					t.Fatal("a sandbox deleted elsewhere still exists here")
				}
				wantSource(t, m, netip.MustParseAddr("10.0.0.9"), "")
				if c, v := d.count(); c != 0 || v != 0 {
					t.Fatalf("engine objects: %d containers %d volumes", c, v)
				}
			},
		},
		{
			name: "the later idle deadline is kept",
			changes: func(id string) []RecordChange {
				first := remoteRecord(id, PhaseRunning)
				first.IdleExpiresAt = &later
				second := remoteRecord(id, PhaseRunning)
				second.LastError = "x" // a change, with an earlier deadline
				return []RecordChange{{ID: id, Record: first}, {ID: id, Record: second}}
			},
			check: func(t *testing.T, m *Manager, _ *fakeDriver, id string) {
				m.mu.RLock()
				defer m.mu.RUnlock()
				e := m.entries[id]
				if e == nil || e.rec.LastError != "x" || e.rec.IdleExpiresAt == nil || !e.rec.IdleExpiresAt.Equal(later) {
					t.Fatalf("entry: %+v", e)
				}
			},
		},
		{
			name: "another gateway's warm member is not this one's",
			changes: func(id string) []RecordChange {
				r := remoteRecord(id, PhaseRunning)
				r.Warm, r.Gateway = true, "gw-b"
				return []RecordChange{{ID: id, Record: r}}
			},
			check: func(t *testing.T, m *Manager, _ *fakeDriver, id string) {
				m.mu.RLock()
				defer m.mu.RUnlock()
				if m.entries[id] != nil {
					t.Fatal("a foreign warm member became an entry")
				}
			},
		},
		{
			name: "a claimed foreign warm member is a sandbox",
			changes: func(id string) []RecordChange {
				r := remoteRecord(id, PhaseRunning)
				r.Warm, r.Gateway = true, "gw-b"
				claimed := remoteRecord(id, PhaseRunning)
				claimed.Gateway = "gw-b"
				return []RecordChange{{ID: id, Record: r}, {ID: id, Record: claimed}}
			},
			check: func(t *testing.T, m *Manager, _ *fakeDriver, id string) {
				if _, ok := m.Resolve(id); !ok {
					t.Fatal("a claimed member does not resolve")
				}
			},
		},
		{
			name: "this gateway's own launch wins over a change",
			local: func(t *testing.T, m *Manager) string {
				sb, err := m.Create(context.Background(), CreateRequest{Profile: "base", Owner: "bob"})
				if err != nil {
					t.Fatal(err)
				}
				return sb.ID // its launch runs (held at the engine's start by startGate)
			},
			changes: func(id string) []RecordChange {
				return []RecordChange{{ID: id, Record: remoteRecord(id, PhaseStopped)}}
			},
			check: func(t *testing.T, m *Manager, _ *fakeDriver, id string) {
				m.mu.RLock()
				defer m.mu.RUnlock()
				e := m.entries[id]
				if e == nil || !e.launching || e.rec.Phase == PhaseStopped || e.rec.Owner != "bob" {
					t.Fatalf("entry: %+v", e)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDriver(t)
			st := newFakeShared(t, false)
			d.startGate = make(chan struct{}) // own launches wait: only the changes move state
			t.Cleanup(func() { close(d.startGate) })
			m := startSharedManager(t, d, st, Config{Profiles: []Profile{testProfile("base")}})
			id := "sb-remote"
			if tc.local != nil {
				id = tc.local(t, m)
			}
			for _, c := range tc.changes(id) {
				st.send(t, c)
			}
			tc.check(t, m, d, id)
			checkSourceIndex(t, m)
		})
	}
}

// TestRemoteStartWaitsForItsGateway: a request for a sandbox another gateway is starting waits for that gateway's
// outcome instead of launching a second start of the same container.
func TestRemoteStartWaitsForItsGateway(t *testing.T) {
	d := newFakeDriver(t)
	st := newFakeShared(t, false)
	m := startSharedManager(t, d, st, Config{Profiles: []Profile{testProfile("base")}})
	st.send(t, RecordChange{ID: "sb-1", Record: remoteRecord("sb-1", PhaseStarting)})
	got := make(chan error, 1)
	var tg Target
	go func() {
		var err error
		tg, err = m.EnsureRunning(context.Background(), "sb-1")
		got <- err
	}()
	st.send(t, RecordChange{ID: "sb-1", Record: remoteRecord("sb-1", PhaseRunning)})
	select {
	case err := <-got:
		if err != nil || tg.Addr != "10.0.0.9:7777" {
			t.Fatalf("ensure running: %+v %v", tg, err)
		}
	case <-time.After(testWait):
		t.Fatal("the request did not end after the other gateway's ready")
	}
	if d.attempts != 0 {
		t.Fatalf("this gateway made %d containers for another's start", d.attempts)
	}
}

const testWait = 20 * time.Second

// TestFleetGCOnlyOnLeader: only the GC lease's holder removes an expired sandbox; the orphan sweep keeps a
// container whose record reached the shared store but not this gateway's memory yet.
func TestFleetGCOnlyOnLeader(t *testing.T) {
	d := newFakeDriver(t)
	st := newFakeShared(t, false)
	m := startSharedManager(t, d, st, Config{Profiles: []Profile{testProfile("base")}, OrphanMinAge: time.Nanosecond})
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "base", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	// A container another gateway made a moment ago: recorded in the store, not yet in this gateway's memory.
	cid, err := d.Create(context.Background(), ContainerSpec{Name: "unit-sb-other", Labels: map[string]string{
		m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelID): "sb-other"}})
	if err != nil {
		t.Fatal(err)
	}
	other := remoteRecord("sb-other", PhaseStarting)
	other.ContainerID = cid
	st.mu.Lock()
	st.fresh = []Record{other}
	st.mu.Unlock()
	expireNow(t, m, sb.ID)

	if rep := m.CollectGarbage(context.Background()); rep.Expired != 0 || rep.OrphanContainers != 0 {
		t.Fatalf("a gateway without the lease collected: %+v", rep)
	}
	m.mu.RLock()
	kept := m.entries[sb.ID] != nil
	m.mu.RUnlock()
	if !kept {
		t.Fatal("the expired sandbox is gone on a non-leader")
	}
	st.leading.Store(true)
	rep := m.CollectGarbage(context.Background())
	if rep.Expired != 1 || rep.OrphanContainers != 0 {
		t.Fatalf("the leader's collection: %+v", rep)
	}
	if _, err := d.Inspect(context.Background(), cid); err != nil {
		t.Fatalf("the leader removed a container recorded by another gateway: %v", err)
	}
	// Once its record is gone everywhere, the same container is an orphan.
	st.mu.Lock()
	st.fresh = nil
	st.mu.Unlock()
	if rep := m.CollectGarbage(context.Background()); rep.OrphanContainers != 1 {
		t.Fatalf("the orphan was not swept: %+v", rep)
	}
	if _, err := d.Inspect(context.Background(), cid); !errors.Is(err, ErrContainerNotFound) {
		t.Fatalf("orphan still there: %v", err)
	}
}

// TestFleetLeaderRecyclesOldForeignWarm: another gateway's warm members are left alone until they pass
// warm_max_age; then the leader's orphan sweep (once per orphan_min_age, here run at once) removes the container
// and the record, as it would a killed gateway's pool.
func TestFleetLeaderRecyclesOldForeignWarm(t *testing.T) {
	cases := []struct {
		name     string
		age      time.Duration
		leading  bool
		recycled bool
	}{
		{"young, leader", time.Minute, true, false},
		{"old, not leader", 2 * time.Hour, false, false},
		{"old, leader", 2 * time.Hour, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDriver(t)
			st := newFakeShared(t, tc.leading)
			m := startSharedManager(t, d, st, Config{Profiles: []Profile{testProfile("base")}, WarmMaxAge: time.Hour})
			cid, err := d.Create(context.Background(), ContainerSpec{Name: "unit-sb-warm", Labels: map[string]string{
				m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelID): "sb-warm"}})
			if err != nil {
				t.Fatal(err)
			}
			r := remoteRecord("sb-warm", PhaseRunning)
			r.Warm, r.Gateway, r.ContainerID, r.CreatedAt = true, "gw-gone", cid, time.Now().Add(-tc.age)
			st.mu.Lock()
			st.fresh = []Record{r}
			st.mu.Unlock()
			rep := m.SweepOrphans(context.Background())
			_, err = d.Inspect(context.Background(), cid)
			if gone := errors.Is(err, ErrContainerNotFound); gone != tc.recycled || (rep.WarmRecycled == 1) != tc.recycled {
				t.Fatalf("recycled: container gone %v, report %+v, want %v", gone, rep, tc.recycled)
			}
		})
	}
}
