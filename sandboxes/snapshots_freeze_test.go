package sandboxes

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// copyingDriver is the fake engine with a freezer and a volume copier: CopyVolume notes whether the container
// that mounts the source could run (running and not frozen) while it copied.
type copyingDriver struct {
	*fakeDriver
	ranDuringCopy []bool
	pauses        int
}

func (d *copyingDriver) Pause(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.containers[id]
	if c == nil || !c.state.Running {
		return fmt.Errorf("container %s is not running", id)
	}
	c.state.Paused = true
	d.pauses++
	return nil
}

func (d *copyingDriver) Unpause(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.containers[id]; c != nil {
		c.state.Paused = false
	}
	return nil
}

func (d *copyingDriver) CopyVolume(_ context.Context, src, dst string, labels map[string]string, _ int64) (CopyStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ran := false
	for _, c := range d.containers {
		if c.spec.Volume == src && c.state.Running && !c.state.Paused {
			ran = true
		}
	}
	d.ranDuringCopy = append(d.ranDuringCopy, ran)
	d.volumes[dst] = VolumeInfo{Name: dst, Labels: labels, Created: time.Now()}
	return CopyStats{Method: CopyStreamed}, nil
}

// TestCaptureFreezesWhateverThePhase: a snapshot or fork never copies a workspace whose container can run, whatever
// the record's phase says. The record can lag the engine: a stop that cancels a launch records Stopped at once
// while the container still runs until the stop takes the operation lock, which a snapshot queued behind the
// launch takes first. Each case sets the record's phase and the engine's state apart, as that race leaves them,
// and checks that the copy ran with the container frozen, and that only a container the capture froze is thawed
// after (one paused before stays paused).
func TestCaptureFreezesWhateverThePhase(t *testing.T) {
	type engine int
	const (
		running engine = iota
		paused
		stopped
		gone
	)
	cases := []struct {
		name       string
		phase      Phase
		engine     engine
		wantFreeze bool
	}{
		{"recorded running, running", PhaseRunning, running, true},
		{"recorded stopped by a stop that cancelled the launch, still running", PhaseStopped, running, true},
		{"recorded starting, running", PhaseStarting, running, true},
		{"recorded failed, running", PhaseFailed, running, true},
		{"recorded paused, paused", PhasePaused, paused, false},
		{"recorded stopped, paused", PhaseStopped, paused, false},
		{"recorded stopped, stopped", PhaseStopped, stopped, false},
		{"recorded stopped, container gone", PhaseStopped, gone, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &copyingDriver{fakeDriver: newFakeDriver(t)}
			m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Apply(context.Background(), Config{Profiles: []Profile{testProfile("p")}}); err != nil {
				t.Fatal(err)
			}
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			ctx := context.Background()
			sb, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "o"})
			if err != nil {
				t.Fatal(err)
			}
			mustReady(t, m, sb.ID)
			m.mu.Lock()
			e := m.entries[sb.ID]
			e.rec.Phase = tc.phase
			cid := e.rec.ContainerID
			m.mu.Unlock()
			d.mu.Lock()
			switch tc.engine {
			case paused:
				d.containers[cid].state.Paused = true
			case stopped:
				d.containers[cid].state.Running = false
			case gone:
				delete(d.containers, cid)
			}
			d.mu.Unlock()

			if _, err := m.CreateSnapshot(ctx, sb.ID, SnapshotRequest{}); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			if _, err := m.Fork(ctx, sb.ID, ForkRequest{}); err != nil {
				t.Fatalf("fork: %v", err)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if len(d.ranDuringCopy) != 2 || d.ranDuringCopy[0] || d.ranDuringCopy[1] {
				t.Fatalf("the source's container could run during a copy (snapshot, fork): %v", d.ranDuringCopy)
			}
			if froze := d.pauses > 0; froze != tc.wantFreeze {
				t.Errorf("froze %d times, want a freeze: %v", d.pauses, tc.wantFreeze)
			}
			if c := d.containers[cid]; c != nil && c.state.Paused != (tc.engine == paused) {
				t.Errorf("after the copies the container is paused: %v, want %v", c.state.Paused, tc.engine == paused)
			}
		})
	}
}
