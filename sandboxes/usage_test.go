package sandboxes

import (
	"context"
	"testing"
	"time"
)

// usageDriver is the fake engine that also reports usage: each container's memory is its number of calls so far.
type usageDriver struct {
	*fakeDriver
	calls map[string]int
}

func (d *usageDriver) Usage(_ context.Context, containerID string) (Usage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.containers[containerID]; !ok {
		return Usage{}, ErrContainerNotFound
	}
	d.calls[containerID]++
	return Usage{MemoryBytes: uint64(d.calls[containerID]), MemoryLimit: 1 << 30}, nil
}

func TestUsageAsksTheDriverForRunningSandboxesOnly(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Profiles: []Profile{testProfile("a")}}

	t.Run("engine without usage", func(t *testing.T) {
		m, _, _ := newTestManager(t, cfg)
		sb, err := m.Create(ctx, CreateRequest{Profile: "a"})
		if err != nil {
			t.Fatal(err)
		}
		mustReady(t, m, sb.ID)
		if got := m.Usage(ctx, []string{sb.ID}); len(got) != 0 {
			t.Fatalf("usage from an engine that reports none: %v", got)
		}
	})

	t.Run("engine with usage", func(t *testing.T) {
		d := &usageDriver{fakeDriver: newFakeDriver(t), calls: map[string]int{}}
		m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Apply(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		running, err := m.Create(ctx, CreateRequest{Profile: "a"})
		if err != nil {
			t.Fatal(err)
		}
		mustReady(t, m, running.ID)
		stopped, err := m.Create(ctx, CreateRequest{Profile: "a"})
		if err != nil {
			t.Fatal(err)
		}
		mustReady(t, m, stopped.ID)
		if err := m.Stop(ctx, stopped.ID); err != nil {
			t.Fatal(err)
		}
		deleted, err := m.Create(ctx, CreateRequest{Profile: "a"})
		if err != nil {
			t.Fatal(err)
		}
		mustReady(t, m, deleted.ID)
		if err := m.Delete(ctx, deleted.ID); err != nil {
			t.Fatal(err)
		}

		got := m.Usage(ctx, []string{running.ID, stopped.ID, deleted.ID, "no-such-sandbox", running.ID})
		if len(got) != 1 || got[running.ID].MemoryBytes != 1 || got[running.ID].MemoryLimit != 1<<30 {
			t.Fatalf("usage: %+v (want the running sandbox's, asked once)", got)
		}
		if got := m.Usage(ctx, nil); len(got) != 0 {
			t.Fatalf("usage of no ids: %v", got)
		}
	})
}

// gatedUsageDriver answers no Usage call until `want` of them are in flight at once: a Manager that asks one
// container after another never gets an answer (and its context ends the calls).
type gatedUsageDriver struct {
	*fakeDriver
	want     int
	inFlight chan struct{}
	release  chan struct{}
}

func (d *gatedUsageDriver) Usage(ctx context.Context, containerID string) (Usage, error) {
	d.inFlight <- struct{}{}
	if len(d.inFlight) == d.want {
		close(d.release)
	}
	select {
	case <-d.release:
		return Usage{MemoryBytes: 1, MemoryLimit: 1 << 30}, nil
	case <-ctx.Done():
		return Usage{}, ctx.Err()
	}
}

// The console's list asks usage for every running sandbox it shows; the engine calls run side by side.
func TestUsageAsksTheEngineInParallel(t *testing.T) {
	const n = 20
	d := &gatedUsageDriver{fakeDriver: newFakeDriver(t), want: n, inFlight: make(chan struct{}, n), release: make(chan struct{})}
	ctx := context.Background()
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, Config{Profiles: []Profile{testProfile("p")}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var ids []string
	for range n {
		sb, err := m.Create(ctx, CreateRequest{Profile: "p"})
		if err != nil {
			t.Fatal(err)
		}
		mustReady(t, m, sb.ID)
		ids = append(ids, sb.ID)
	}
	// The deadline only ends a Manager that never gets all n in flight; a parallel one returns once they are.
	uctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if got := m.Usage(uctx, ids); len(got) != n {
		t.Fatalf("usage of %d of %d sandboxes: the calls did not run side by side", len(got), n)
	}
}
