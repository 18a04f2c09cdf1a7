package sandboxes

import (
	"context"
	"testing"
	"time"
)

// TestSpareCopyTarget: the first copy target is made by its copier; once it is done a spare is made in the
// background, which the orphan sweep keeps, a caller cannot mount by naming its id, and the next copy takes
// (premade); Close removes the spare nobody took.
func TestSpareCopyTarget(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}, OrphanMinAge: time.Nanosecond, GCInterval: time.Hour})
	ctx := context.Background()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	spare := func() (ws string) {
		t.Helper()
		waitFor("a spare", func() bool {
			m.mu.RLock()
			defer m.mu.RUnlock()
			if len(m.spares.ready) == 1 {
				ws = m.spares.ready[0]
			}
			return ws != ""
		})
		return ws
	}
	// The collector's first pass, kicked at Start, must be over before volumes exist: the second target below is
	// let go without a sandbox on it, which makes its volume an orphan that a late pass would rightly remove. The
	// only pass after this one is the test's own.
	waitFor("the start's orphan sweep", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.volumeLists > 0
	})
	hasVolume := func(ws string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.volumes[m.VolumeName(ws)]
		return ok
	}

	first, premade, done := m.takeCopyTarget()
	if premade || hasVolume(first) {
		t.Fatalf("first target %s premade=%v before any spare was made", first, premade)
	}
	m.mu.RLock()
	held := m.spares.held[first]
	m.mu.RUnlock()
	if !held {
		t.Fatal("a copy target in use is not held")
	}
	done()
	ws := spare()
	if ws == first || !hasVolume(ws) {
		t.Fatalf("spare %s (first %s) has no volume", ws, first)
	}
	d.mu.Lock()
	labels := d.volumes[m.VolumeName(ws)].Labels
	d.mu.Unlock()
	if labels[m.label(labelManagedWorkspace)] != "true" || labels[m.label(labelWorkspace)] != ws {
		t.Fatalf("spare labels %v", labels)
	}

	// The orphan sweep keeps it; a caller naming it gets not found.
	m.CollectGarbage(ctx)
	if !hasVolume(ws) {
		t.Fatal("the orphan sweep removed the spare")
	}
	if _, err := m.Create(ctx, CreateRequest{Profile: "p", WorkspaceID: ws}); ErrorCode(err) != CodeNotFound {
		t.Fatalf("create on the spare's workspace id: %v", err)
	}

	// The next copy takes it, made.
	got, premade, done := m.takeCopyTarget()
	if got != ws || !premade {
		t.Fatalf("second target %s premade=%v, want the spare %s", got, premade, ws)
	}
	done()
	next := spare()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if hasVolume(next) {
		t.Fatal("Close left the unclaimed spare")
	}
	if !hasVolume(ws) {
		t.Fatal("Close removed a volume a copy took")
	}
}
