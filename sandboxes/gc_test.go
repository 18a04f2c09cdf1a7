package sandboxes

import (
	"context"
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
	for deadline := time.Now().Add(10 * time.Second); lists() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pass kicked at Start never swept")
		}
	}
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

// TestOrphanSweepKeepsJoinedHolders: a network holder a container joined stays however old; one nothing joined
// goes once it is older than orphan_min_age, like any orphan.
func TestOrphanSweepKeepsJoinedHolders(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}, GCInterval: time.Hour, OrphanMinAge: time.Hour})
	ctx := context.Background()
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
