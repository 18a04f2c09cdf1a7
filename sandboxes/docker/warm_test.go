package docker_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// warmClock is the pool's clock in this test: real time plus what the test moved it by, so demand leaves the
// window when the test says so and backoffs still run out.
type warmClock struct{ offset atomic.Int64 }

func (c *warmClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *warmClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func poolStats(t *testing.T, mgr *sandboxes.Manager, profile string) sandboxes.PoolStats {
	t.Helper()
	pools, _ := mgr.WarmPools()
	for _, p := range pools {
		if p.Profile == profile {
			return p
		}
	}
	t.Fatalf("no pool %q", profile)
	return sandboxes.PoolStats{}
}

// TestWarmPoolFollowsDemandOnTheEngine runs the adaptive pool on the real engine with our image: it grows after a
// burst, never holds more containers than max_sandboxes, shrinks back to its floor once the burst leaves the
// demand window, and a profile whose image does not exist backs off with typed events instead of looping.
func TestWarmPoolFollowsDemandOnTheEngine(t *testing.T) {
	image := testenv.Image(t, "base")
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ns := testenv.Unique("sgw")
	testenv.RemoveNamespace(t, ns)
	drv, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	clock := &warmClock{}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: ns, Clock: clock.now}, drv,
		sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "store.db")), logger)
	if err != nil {
		t.Fatal(err)
	}
	events, unsubscribe := mgr.Subscribe(256)
	defer unsubscribe()
	w := smallProfile("w", image)
	w.WarmPoolSize, w.WarmPoolMax = 1, 8
	broken := smallProfile("broken", "sandgate-pool-missing/none:absent")
	broken.WarmPoolSize = 1
	const maxSandboxes = 6
	ctx := context.Background()
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{w, broken}, MaxSandboxes: maxSandboxes,
		MaxConcurrentStarts: 4, WarmRefillPerSecond: 100, WarmDemandWindow: time.Minute,
		WarmRetryBackoff: 200 * time.Millisecond, GCInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })

	// Watch the engine: our containers never number more than max_sandboxes.
	var peak atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watched sync.WaitGroup
	watched.Add(1)
	go func() {
		defer watched.Done()
		f := filters.NewArgs(filters.Arg("label", ns+".managed=true"))
		for watchCtx.Err() == nil {
			list, err := cli.ContainerList(watchCtx, container.ListOptions{All: true, Filters: f})
			if err == nil && int64(len(list)) > peak.Load() {
				peak.Store(int64(len(list)))
			}
		}
	}()
	defer func() {
		stopWatch()
		watched.Wait()
		if p := peak.Load(); p > maxSandboxes {
			t.Errorf("the engine held %d of our containers at once, max_sandboxes is %d", p, maxSandboxes)
		}
	}()

	// The broken profile: each failed refill pauses the pool, twice as long each time, with a typed event.
	var backoffs []time.Duration
	deadline := time.After(testenv.WaitLimit)
	for len(backoffs) < 3 {
		select {
		case ev := <-events:
			if ev.Type == sandboxes.EventWarmBackoff && ev.Profile == "broken" {
				backoffs = append(backoffs, ev.Duration)
			}
		case <-deadline:
			t.Fatalf("backoff events: %v", backoffs)
		}
	}
	if fmt.Sprint(backoffs) != fmt.Sprint([]time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}) {
		t.Fatalf("backoffs %v", backoffs)
	}
	if s := poolStats(t, mgr, "broken"); s.LastError == "" || s.Ready != 0 || s.RefillFailures < 3 || s.RefillFailures > 4 {
		t.Fatalf("broken pool: %+v", s)
	}
	testenv.WaitUntil(t, "the floor of one ready member", func() bool { return poolStats(t, mgr, "w").Ready == 1 })
	// A burst of 5 inside one cold start: 1 from the pool, 4 cold; the target grows to min(5 x 1.5, max, cap).
	var ids []string
	for range 5 {
		sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: "w"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	if s := poolStats(t, mgr, "w"); s.Hits != 1 || s.Hits+s.Prestarted+s.Misses != 5 {
		t.Fatalf("after the burst: %+v", s)
	}
	testenv.WaitUntil(t, "the target to grow", func() bool { return poolStats(t, mgr, "w").Target == maxSandboxes })
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, testenv.WaitLimit)
		if _, err := mgr.EnsureRunning(rctx, id); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	// The burst's sandboxes hold 5 of the 6 places; once they go, the pool fills to its target.
	for _, id := range ids {
		if err := mgr.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitUntil(t, "the pool to fill to its target", func() bool { s := poolStats(t, mgr, "w"); return s.Ready == maxSandboxes })
	// A second burst of the same size is now all warm claims, ready at once.
	for i := range 5 {
		sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: "w"})
		if err != nil || sb.LaunchType != sandboxes.LaunchWarm || sb.Status != sandboxes.StatusReady {
			t.Fatalf("second burst, create %d: %+v %v", i, sb, err)
		}
		ids[i] = sb.ID
	}
	for _, id := range ids {
		if err := mgr.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Demand falls: once both bursts leave the window, the pool shrinks back to its floor.
	clock.advance(2 * time.Minute)
	testenv.WaitUntil(t, "the pool to shrink to its floor", func() bool {
		s := poolStats(t, mgr, "w")
		return s.Target == 1 && s.Ready == 1 && s.Starting == 0
	})
	testenv.WaitUntil(t, "the surplus containers to go", func() bool {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", ns+".managed=true"), filters.Arg("label", ns+".profile=w"))})
		return err == nil && len(list) == 1
	})

	// Later failures kept doubling: one attempt per pause, never a loop.
	last := backoffs[len(backoffs)-1]
	for drained := false; !drained; {
		select {
		case ev := <-events:
			if ev.Type == sandboxes.EventWarmBackoff && ev.Profile == "broken" {
				if ev.Duration != 2*last && ev.Duration != 5*time.Minute {
					t.Fatalf("backoff %s after %s", ev.Duration, last)
				}
				last = ev.Duration
				backoffs = append(backoffs, ev.Duration)
			}
		default:
			drained = true
		}
	}
	if s := poolStats(t, mgr, "broken"); s.RefillFailures > uint64(len(backoffs))+1 {
		t.Fatalf("%d refill failures for %d backoffs", s.RefillFailures, len(backoffs))
	}
}
