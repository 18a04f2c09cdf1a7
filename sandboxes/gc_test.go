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
