package sandboxes

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestOrphanSweepRunsOncePerMinAge: the orphan sweep's engine listings (every container and volume of the instance)
// run at the first pass and then once per orphan_min_age, not on every pass; SweepOrphans runs them now, and a pass
// once orphan_min_age has gone by since the last sweep runs them again.
func TestOrphanSweepRunsOncePerMinAge(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}, GCInterval: time.Hour, OrphanMinAge: time.Hour})
	ctx := context.Background()
	lists := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.volumeLists
	}
	// Start lists the volumes once (listInherited); the pass kicked at Start sweeps, listing them again (HOME
	// seeds, workspaces). Wait for that pass to end, not for a count of listings: one reached mid-sweep flaked.
	waitForStartPass(t, m)
	before := lists()
	for i := range 3 {
		if rep := m.CollectGarbage(ctx); rep.Swept {
			t.Fatalf("pass %d swept again within orphan_min_age: %+v", i, rep)
		}
	}
	if got := lists(); got != before {
		t.Fatalf("passes between sweeps listed volumes %d times", got-before)
	}

	orphan := m.VolumeName("ws-orphan")
	d.mu.Lock()
	d.volumes[orphan] = VolumeInfo{Name: orphan, Created: time.Now().Add(-2 * time.Hour), Labels: map[string]string{
		m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelManagedWorkspace): "true"}}
	d.mu.Unlock()
	if rep := m.SweepOrphans(ctx); !rep.Swept || rep.OrphanVolumes != 1 {
		t.Fatalf("SweepOrphans: %+v, want the orphan volume removed", rep)
	}
	if rep := m.CollectGarbage(ctx); rep.Swept {
		t.Fatalf("a pass right after SweepOrphans swept: %+v", rep)
	}

	m.mu.Lock()
	m.lastSweep = m.lastSweep.Add(-time.Hour) // orphan_min_age has gone by
	m.mu.Unlock()
	if rep := m.CollectGarbage(ctx); !rep.Swept {
		t.Fatalf("a pass orphan_min_age after the last sweep did not sweep: %+v", rep)
	}
}

// waitForStartPass waits until the collection Start kicks has swept and ended.
func waitForStartPass(t *testing.T, m *Manager) {
	t.Helper()
	waitFor(t, func() bool {
		m.mu.RLock()
		swept := !m.lastSweep.IsZero()
		m.mu.RUnlock()
		return swept && !m.GCState().Running
	})
}

// TestOrphanSweepKeepsJoinedHolders: a network holder a container joined stays however old; one nothing joined
// goes once it is older than orphan_min_age, like any orphan.
func TestOrphanSweepKeepsJoinedHolders(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}, GCInterval: time.Hour, OrphanMinAge: time.Hour})
	ctx := context.Background()
	// Start kicks one collection, whose sweep must be over before the objects below exist: else it may remove the
	// old spare itself, and the sweep asked for below counts nothing (it flaked so, 4 runs in 60).
	waitForStartPass(t, m)
	holder := func(id string) *fakeContainer {
		return &fakeContainer{state: ContainerState{ID: id, Running: true, Created: time.Now().Add(-2 * time.Hour), Labels: map[string]string{
			m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelHolder): m.InternalNetwork()}}}
	}
	d.mu.Lock()
	d.containers["h-joined"] = holder("h-joined")
	d.containers["h-spare"] = holder("h-spare")
	fresh := holder("h-fresh")
	fresh.state.Created = time.Now()
	d.containers["h-fresh"] = fresh
	// What joined h-joined: a sandbox's container the Manager does not own either (its record is gone), younger than
	// orphan_min_age, so it stays this sweep and keeps its holder.
	d.containers["c-joiner"] = &fakeContainer{state: ContainerState{ID: "c-joiner", Running: true, Created: time.Now(), JoinedTo: "h-joined",
		Labels: map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelID): "sandbox-gone"}}}
	d.mu.Unlock()
	rep := m.SweepOrphans(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	_, joined := d.containers["h-joined"]
	_, spare := d.containers["h-spare"]
	_, young := d.containers["h-fresh"]
	if rep.OrphanContainers != 1 || !joined || spare || !young {
		t.Fatalf("sweep %+v: joined holder kept %v, old spare kept %v, young spare kept %v; want only the old spare removed", rep, joined, spare, young)
	}
}

// TestStartSweepsWhatAnEarlierProcessLeft: a gateway killed mid-copy (a snapshot's volume, a fork's workspace) or
// mid-create (a container not yet recorded) leaves objects no record names. The first sweep after the restart
// removes them at once, however young (nothing of that dead process is in flight), and still spares an unowned
// object made after the start (a create or copy of this process in flight) until orphan_min_age.
func TestStartSweepsWhatAnEarlierProcessLeft(t *testing.T) {
	cfg := Config{Profiles: []Profile{testProfile("p")}, GCInterval: time.Hour, OrphanMinAge: time.Hour}
	d := newFakeDriver(t)
	path := t.TempDir() + "/store.db"
	m := startTestManager(t, d, path, cfg)
	ctx := context.Background()
	kept, err := m.Create(ctx, CreateRequest{Profile: "p", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, kept.ID)
	instance := m.Instance()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ours := func(extra map[string]string) map[string]string {
		l := map[string]string{"unit.managed": "true", "unit.instance": instance}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	// Made just before the restart, within the same second as it (the engine's timestamps have one-second
	// precision): well inside orphan_min_age (1h).
	young := time.Now()
	d.mu.Lock()
	d.volumes["unit-ws-halfforked"] = VolumeInfo{Name: "unit-ws-halfforked", Created: young, Labels: ours(map[string]string{"unit.managed_workspace": "true", "unit.workspace": "ws-halfforked"})}
	d.volumes["unit-snap-half"] = VolumeInfo{Name: "unit-snap-half", Created: young, Labels: ours(map[string]string{"unit.snapshot": "snap-half", "unit.managed_workspace": "false"})}
	d.containers["c-unrecorded"] = &fakeContainer{state: ContainerState{ID: "c-unrecorded", Name: "unit-sb-unrecorded", Created: young, Running: true,
		Labels: ours(map[string]string{"unit.id": "sb-unrecorded"})}}
	d.mu.Unlock()

	m2 := startTestManager(t, d, path, cfg)
	waitFor(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, v1 := d.volumes["unit-ws-halfforked"]
		_, v2 := d.volumes["unit-snap-half"]
		_, c := d.containers["c-unrecorded"]
		return !v1 && !v2 && !c
	})
	waitFor(t, func() bool { g, _ := m2.Get(ctx, kept.ID); return g != nil && g.Status == StatusReady })

	// Made after the start and owned by nobody yet: spared until orphan_min_age.
	d.mu.Lock()
	d.volumes["unit-ws-inflight"] = VolumeInfo{Name: "unit-ws-inflight", Created: time.Now(), Labels: ours(map[string]string{"unit.managed_workspace": "true", "unit.workspace": "ws-inflight"})}
	d.volumes["unit-snap-inflight"] = VolumeInfo{Name: "unit-snap-inflight", Created: time.Now(), Labels: ours(map[string]string{"unit.snapshot": "snap-inflight", "unit.managed_workspace": "false"})}
	d.mu.Unlock()
	if rep := m2.SweepOrphans(ctx); rep.OrphanVolumes != 0 || rep.OrphanContainers != 0 {
		t.Fatalf("a sweep removed objects made after the start: %+v", rep)
	}
	if _, err := m2.EnsureRunning(ctx, kept.ID); err != nil {
		t.Fatalf("the recorded sandbox after the sweep: %v", err)
	}
}

// TestRunGCConcurrentCallsCountOnce: RunGC called from many goroutines at once (Bay's admin GC raced by its clients)
// runs whole passes one at a time: three expired sandboxes are removed and counted once across all the reports,
// with no error from a pass removing what another already removed.
func TestRunGCConcurrentCallsCountOnce(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}, GCInterval: time.Hour})
	ctx := context.Background()
	for range 3 {
		sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		mustReady(t, m, sb.ID)
		expireNow(t, m, sb.ID)
	}
	reps := make(chan GCReport, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := m.RunGC(ctx)
			if err != nil {
				t.Error(err)
			}
			reps <- rep
		}()
	}
	wg.Wait()
	close(reps)
	expired, errs := 0, 0
	for r := range reps {
		expired += r.Expired
		errs += r.Errors + len(r.Failures)
	}
	if expired != 3 || errs != 0 {
		t.Fatalf("expired %d (want 3), %d errors", expired, errs)
	}
	if c, v := d.count(); c != 0 || v != 0 {
		t.Errorf("left %d containers, %d volumes", c, v)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.RunGC(cancelled); err == nil {
		t.Error("a cancelled call ran a pass")
	}
}

// TestSweepSparesASandboxBeingDeleted: a delete has detached its sandbox and is about to remove its container and
// workspace (held here on the entry's operation lock, as a slow engine call holds it) when an operator's
// collection runs its orphan sweep. The sweep leaves both to the delete: it counts nothing and fails on nothing
// (it used to remove the container and fail on the still-mounted volume: "volume is in use"), and the delete then
// removes both and the record.
func TestSweepSparesASandboxBeingDeleted(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}, GCInterval: time.Hour, OrphanMinAge: time.Nanosecond})
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	m.mu.RLock()
	e := m.entries[sb.ID]
	m.mu.RUnlock()
	e.opMu.Lock()
	deleted := make(chan error, 1)
	go func() { deleted <- m.Delete(ctx, sb.ID) }()
	waitFor(t, func() bool { // the delete has detached the sandbox
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.entries[sb.ID] == nil
	})
	rep, err := m.RunGC(ctx)
	if err != nil || rep.OrphanContainers != 0 || rep.OrphanVolumes != 0 || rep.Errors != 0 {
		t.Errorf("the sweep during the delete: %+v %v", rep, err)
	}
	if c, v := d.count(); c != 1 || v != 1 {
		t.Errorf("the sweep took the delete's objects: %d containers, %d volumes left", c, v)
	}
	e.opMu.Unlock()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if c, v := d.count(); c != 0 || v != 0 {
		t.Errorf("after the delete: %d containers, %d volumes", c, v)
	}
	m.mu.RLock()
	left := len(m.removing)
	m.mu.RUnlock()
	if left != 0 {
		t.Errorf("%d sandboxes still marked as being removed", left)
	}
}
