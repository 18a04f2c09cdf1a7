package sandboxes

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// countingStore is a BoltStore that counts the records written and the write calls (each call is one fsync).
type countingStore struct {
	*BoltStore
	mu            sync.Mutex
	calls, writes int
}

func (s *countingStore) Put(r Record) error {
	s.mu.Lock()
	s.calls++
	s.writes++
	s.mu.Unlock()
	return s.BoltStore.Put(r)
}

func (s *countingStore) PutMany(recs []Record) error {
	s.mu.Lock()
	s.calls++
	s.writes += len(recs)
	s.mu.Unlock()
	return s.BoltStore.PutMany(recs)
}

func (s *countingStore) take() (calls, writes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, w := s.calls, s.writes
	s.calls, s.writes = 0, 0
	return c, w
}

// addIdleEntries puts n running sandboxes with an idle timeout straight into the Manager's memory, as a restart
// would adopt them, without n engine round trips through the fake driver.
func addIdleEntries(t *testing.T, m *Manager, n int) []string {
	t.Helper()
	p := testProfile("p")
	p.IdleTimeout = Duration(time.Hour)
	now := time.Now()
	ids := make([]string, n)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("sb%05d", i)
		idle := now.Add(time.Hour)
		ids[i] = id
		m.entries[id] = &entry{rec: Record{ID: id, Profile: "p", Owner: "o", WorkspaceID: id, Phase: PhaseRunning,
			CreatedAt: now.Add(time.Duration(i) * time.Millisecond), IdleExpiresAt: &idle}, profile: p, lastPersist: now}
	}
	return ids
}

// A collector pass writes only what changed since the last write, in one transaction: with thousands of idle
// sandboxes it used to write every record, one fsync each.
func TestCollectorWritesOnlyChangedRecordsInOneBatch(t *testing.T) {
	const n = 3000
	d := newFakeDriver(t)
	st := &countingStore{BoltStore: NewBoltStore(t.TempDir() + "/store.db")}
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Apply(ctx, Config{Profiles: []Profile{testProfile("p")}, GCInterval: time.Hour, OrphanMinAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ids := addIdleEntries(t, m, n)
	st.take()

	for _, step := range []struct {
		name          string
		touch         int
		calls, writes int
	}{
		{"first pass: nothing was written yet", 0, 1, n},
		{"nothing changed", 0, 0, 0},
		{"nothing changed again", 0, 0, 0},
		{"a few touched", 7, 1, 7},
	} {
		m.mu.Lock()
		for _, id := range ids[:step.touch] {
			// What Touch does between its throttled writes: a new idle deadline in memory only.
			m.touchLocked(m.entries[id], time.Now().Add(time.Minute))
		}
		m.mu.Unlock()
		rep := m.CollectGarbage(ctx)
		if rep.Errors != 0 {
			t.Fatalf("%s: %+v", step.name, rep)
		}
		if calls, writes := st.take(); calls != step.calls || writes != step.writes {
			t.Errorf("%s: %d store calls writing %d records, want %d calls writing %d", step.name, calls, writes, step.calls, step.writes)
		}
	}

	// A change to a record that was written nowhere (every change but the idle deadline is written at once): a
	// plain pass does not look for it, the next pass with the orphan sweep (once per orphan_min_age) writes it.
	m.mu.Lock()
	m.entries[ids[1]].rec.Metadata = map[string]string{"k": "v"}
	m.mu.Unlock()
	for _, step := range []struct {
		name          string
		pass          func(context.Context) GCReport
		calls, writes int
	}{{"a plain pass", m.CollectGarbage, 0, 0}, {"a pass with the sweep", m.SweepOrphans, 1, 1}, {"then nothing", m.SweepOrphans, 0, 0}} {
		if rep := step.pass(ctx); rep.Errors != 0 {
			t.Fatalf("%s: %+v", step.name, rep)
		}
		if calls, writes := st.take(); calls != step.calls || writes != step.writes {
			t.Errorf("unwritten change, %s: %d store calls writing %d records, want %d calls writing %d", step.name, calls, writes, step.calls, step.writes)
		}
	}

	// The batch really is in the store: a second Manager on the same file sees the touched deadline.
	m.mu.RLock()
	want := *m.entries[ids[0]].rec.IdleExpiresAt
	m.mu.RUnlock()
	recs, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("store holds %d records, want %d", len(recs), n)
	}
	for _, r := range recs {
		if r.ID == ids[0] && (r.IdleExpiresAt == nil || !r.IdleExpiresAt.Equal(want)) {
			t.Fatalf("stored idle deadline %v, want %v", r.IdleExpiresAt, want)
		}
	}
}

// A flush never writes back a sandbox deleted after the flush read the entries.
func TestFlushSkipsDeletedEntries(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}, GCInterval: time.Hour, OrphanMinAge: time.Hour})
	ids := addIdleEntries(t, m, 3)
	m.mu.Lock()
	m.entries[ids[1]].deleted = true
	m.mu.Unlock()
	m.flushAll(false)
	recs, err := m.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range recs {
		got[r.ID] = true
	}
	if !got[ids[0]] || got[ids[1]] || !got[ids[2]] {
		t.Fatalf("stored %v, want %s and %s only", got, ids[0], ids[2])
	}
}

// Collector passes that overlap (the loop's and an asked one) both finish: a flush holds many sandboxes' write
// locks at once, so two at a time taking them in map order would deadlock.
func TestOverlappingFlushesFinish(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}, GCInterval: time.Hour, OrphanMinAge: time.Hour})
	ids := addIdleEntries(t, m, 500)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				m.mu.Lock()
				for _, id := range ids[:50] {
					m.touchLocked(m.entries[id], time.Now())
				}
				m.mu.Unlock()
				m.flushAll(false)
			}
		}()
	}
	wg.Wait()
}
