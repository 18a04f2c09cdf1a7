package sandboxes

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// t0 is the fake clock's origin: the pool's arithmetic takes the time as an argument.
var t0 = time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)

// TestDemandBeforeRefill: the window stays one cold start while the refill slots outnumber the claims in it, and
// widens when they do not, so an overload a fast engine's refills cannot keep up with sizes the pool for all of it.
func TestDemandBeforeRefill(t *testing.T) {
	at := func(ms ...int) *demandWindow {
		var d demandWindow
		for _, m := range ms {
			d.record(t0.Add(time.Duration(m) * time.Millisecond))
		}
		return &d
	}
	every := func(n int, gap time.Duration) *demandWindow {
		var d demandWindow
		for i := range n {
			d.record(t0.Add(time.Duration(i) * gap))
		}
		return &d
	}
	tests := []struct {
		name      string
		d         *demandWindow
		coldStart time.Duration
		slots     int
		horizon   time.Duration
		want      int
	}{
		{"steady demand the refills keep up with: one cold start", every(30, time.Second), 3 * time.Second, 4, time.Minute, 3},
		{"8/s for 3 s, 0.62 s cold start, 3 slots: all of it", every(24, 125*time.Millisecond), 620 * time.Millisecond, 3, time.Minute, 24},
		{"the same on a slow engine, 3 s cold start", every(24, 125*time.Millisecond), 3 * time.Second, 3, time.Minute, 24},
		{"one burst more than the slots: the burst, no more", at(0, 1, 2, 3, 4, 5, 5000, 10000), time.Second, 2, time.Minute, 6},
		{"bounded by the horizon", every(100, 100*time.Millisecond), 500 * time.Millisecond, 1, 2 * time.Second, 20},
		{"no slots measured yet: one cold start", every(24, 125*time.Millisecond), 620 * time.Millisecond, 0, time.Minute, 5},
		{"no demand", at(), time.Second, 3, time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.demandBeforeRefill(tt.coldStart, tt.slots, tt.horizon); got != tt.want {
				t.Errorf("demand before refill %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDemandWindowPeakAndTarget(t *testing.T) {
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name           string
		arrivals       []int // milliseconds after t0
		window         time.Duration
		floor, ceiling int
		peak, target   int
	}{
		{"no demand keeps the floor", nil, time.Second, 2, 10, 0, 2},
		{"steady 1/s within a 1s cold start", []int{0, 1000, 2000, 3000}, time.Second, 1, 10, 1, 2},
		{"a burst of 6", []int{0, 1, 2, 3, 4, 5}, time.Second, 1, 20, 6, 9},
		{"a burst bounded by the ceiling", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, time.Second, 1, 12, 10, 12},
		{"a slower cold start sees more demand", []int{0, 500, 1000, 1500, 2000}, 2 * time.Second, 0, 20, 4, 6},
		{"no ceiling above the floor", []int{0, 1, 2}, time.Second, 3, 3, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d demandWindow
			for _, a := range tt.arrivals {
				d.record(ms(a))
			}
			if got := d.peak(tt.window); got != tt.peak {
				t.Errorf("peak %d, want %d", got, tt.peak)
			}
			if got := poolTarget(d.peak(tt.window), tt.floor, tt.ceiling); got != tt.target {
				t.Errorf("target %d, want %d", got, tt.target)
			}
		})
	}
}

func TestDemandWindowForgetsOldArrivals(t *testing.T) {
	var d demandWindow
	for i := range 10 {
		d.record(t0.Add(time.Duration(i) * time.Millisecond))
	}
	d.prune(t0.Add(time.Minute), 5*time.Minute)
	if d.peak(time.Second) != 10 {
		t.Fatalf("pruned arrivals inside the horizon: %d", d.peak(time.Second))
	}
	d.prune(t0.Add(6*time.Minute), 5*time.Minute)
	if d.peak(time.Second) != 0 {
		t.Fatalf("kept arrivals past the horizon: %d", d.peak(time.Second))
	}
	for i := range maxDemandSamples + 100 {
		d.record(t0.Add(time.Duration(i) * time.Microsecond))
	}
	if len(d.arrivals) != maxDemandSamples {
		t.Fatalf("a create storm grew the window to %d", len(d.arrivals))
	}
}

func TestConcurrencyTunerFindsTheEnginesBestLevel(t *testing.T) {
	// A fake engine: one start takes 1s alone; up to 3 at once overlap well, past that they only queue
	// (throughput 1, 1.8, 2.4, 2.0, 1.6 starts/s at levels 1..5).
	latency := map[int]time.Duration{1: time.Second, 2: 1111 * time.Millisecond, 3: 1250 * time.Millisecond,
		4: 2 * time.Second, 5: 3125 * time.Millisecond}
	tu := newConcurrencyTuner(5)
	if tu.limit() != 1 {
		t.Fatalf("an unmeasured engine starts at %d", tu.limit())
	}
	seen := map[int]bool{}
	for range 200 {
		k := tu.limit()
		seen[k] = true
		tu.observe(k, latency[k])
	}
	if got := tu.best(); got != 3 {
		t.Fatalf("settled at %d, want 3 (levels tried %v)", got, seen)
	}
	if !seen[4] || seen[5] {
		t.Fatalf("levels tried %v: want 4 probed and 5 never (4 is already worse)", seen)
	}
	tu.setCeiling(2)
	if got := tu.limit(); got > 2 {
		t.Fatalf("limit %d above a lowered ceiling", got)
	}
}

func TestWarmBackoffDoublesToACap(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 20: warmBackoffMax} {
		if got := warmBackoff(time.Second, n); got != want {
			t.Errorf("failure %d: %s, want %s", n, got, want)
		}
	}
}

func TestStartQueueServesUsersFirstInArrivalOrder(t *testing.T) {
	q := newStartQueue(1)
	hold, err := q.acquire(context.Background(), startUser)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enqueue := func(name string, class int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := q.acquire(context.Background(), class)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			release()
		}()
		// Each waiter is queued before the next arrives.
		waitFor(t, func() bool {
			_, w := q.state()
			return w[startUser]+w[startRefill] == len(name)
		})
	}
	enqueue("r", startRefill)
	enqueue("u1", startUser)
	enqueue("u22", startUser)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() { _, err := q.acquire(ctx, startUser); gaveUp <- err }()
	waitFor(t, func() bool { _, w := q.state(); return w[startUser] == 3 })
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a cancelled wait got a slot")
	}
	hold()
	wg.Wait()
	if fmt.Sprint(order) != "[u1 u22 r]" {
		t.Fatalf("served %v, want users in arrival order, then the refill", order)
	}
	if inUse, _ := q.state(); inUse != 0 {
		t.Fatalf("%d slots leaked", inUse)
	}
}

func poolOf(t *testing.T, m *Manager, profile string) PoolStats {
	t.Helper()
	pools, _ := m.WarmPools()
	for _, p := range pools {
		if p.Profile == profile {
			return p
		}
	}
	t.Fatalf("no pool %s in %+v", profile, pools)
	return PoolStats{}
}

// fakeClock is the warm pool's clock in tests: demand arrives and leaves the window when the test says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestWarmPoolGrowsUnderABurstAndShrinksAfter(t *testing.T) {
	p := testProfile("w")
	p.WarmPoolSize, p.WarmPoolMax = 1, 12
	d := newFakeDriver(t)
	d.startDelay = 20 * time.Millisecond
	clock := &fakeClock{now: t0}
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.clock = clock.Now
	if err := m.Apply(context.Background(), Config{Profiles: []Profile{p}, WarmRefillPerSecond: 1000,
		WarmDemandWindow: time.Minute, GCInterval: time.Hour, MaxConcurrentStarts: 8}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	waitFor(t, func() bool { return poolOf(t, m, "w").Ready == 1 })
	ctx := context.Background()
	var ids []string
	for range 6 {
		sb, err := m.Create(ctx, CreateRequest{Profile: "w"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	// Six creates at one instant: the pool grows to 6 x 1.5 = 9 and fills.
	waitFor(t, func() bool { s := poolOf(t, m, "w"); return s.Target == 9 && s.Ready == 9 })
	s := poolOf(t, m, "w")
	if s.Hits != 1 || s.Hits+s.Prestarted+s.Misses != 6 || s.PeakDemand != 6 {
		t.Fatalf("after the burst: %+v", s)
	}
	for _, id := range ids {
		mustReady(t, m, id)
	}
	// A second burst of the same size is served from the pool.
	clock.Advance(30 * time.Second)
	for range 6 {
		sb, err := m.Create(ctx, CreateRequest{Profile: "w"})
		if err != nil || sb.LaunchType != LaunchWarm || sb.Status != StatusReady {
			t.Fatalf("second burst: %+v %v", sb, err)
		}
	}
	waitFor(t, func() bool { s := poolOf(t, m, "w"); return s.Ready == 9 })
	// The first burst leaves the window: the second still holds the target.
	clock.Advance(31 * time.Second)
	kick(m.warmKick)
	waitFor(t, func() bool { s := poolOf(t, m, "w"); return s.Target == 9 && s.Ready == 9 })
	// Demand falls: once both bursts left the window, the pool shrinks back to its floor.
	clock.Advance(31 * time.Second)
	kick(m.warmKick)
	waitFor(t, func() bool { s := poolOf(t, m, "w"); return s.Target == 1 && s.Ready == 1 && s.Starting == 0 })
	waitFor(t, func() bool { c, _ := d.count(); return c == 1+12 })
}

func TestWarmPoolNeverExceedsMaxSandboxes(t *testing.T) {
	p := testProfile("w")
	p.WarmPoolSize, p.WarmPoolMax = 2, 50
	d := newFakeDriver(t)
	d.startDelay = 5 * time.Millisecond
	d.removeDelay = 10 * time.Millisecond // a removed container lingers, as Docker's does
	m := startTestManager(t, d, t.TempDir()+"/store.db", Config{Profiles: []Profile{p, testProfile("c")}, MaxSandboxes: 6,
		WarmRefillPerSecond: 1000, WarmDemandWindow: time.Minute, GCInterval: time.Hour, MaxConcurrentStarts: 8})
	ctx := context.Background()
	waitFor(t, func() bool { return poolOf(t, m, "w").Ready == 2 })
	for round := range 3 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var made []string
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prof := "w"
				if i%3 == 0 {
					prof = "c"
				}
				sb, err := m.Create(ctx, CreateRequest{Profile: prof})
				if err != nil {
					if ErrorCode(err) != CodeQuotaExceeded {
						t.Errorf("round %d: %v", round, err)
					}
					return
				}
				mu.Lock()
				made = append(made, sb.ID)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(made) == 0 || len(made) > 6 {
			t.Fatalf("round %d: %d creates succeeded under a cap of 6", round, len(made))
		}
		for _, id := range made {
			mustReady(t, m, id)
		}
		// The demand asks for more than the cap: the pool is bounded by it.
		if s := poolOf(t, m, "w"); s.Target != 6 || s.PeakDemand*3/2 <= 6 {
			t.Fatalf("round %d: %+v: want demand above the cap and the target at it", round, s)
		}
		for _, id := range made {
			if err := m.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, func() bool { c, _ := d.count(); return c == 6 })
	}
	d.mu.Lock()
	peak := d.peak
	d.mu.Unlock()
	if peak > 6 {
		t.Fatalf("the engine held %d containers at once, max_sandboxes is 6", peak)
	}
}

func TestWarmRefillFailureBacksOffWithATypedEvent(t *testing.T) {
	p := testProfile("w")
	p.WarmPoolSize, p.WarmPoolMax = 3, 10
	d := newFakeDriver(t)
	d.failCreate = true
	path := t.TempDir() + "/store.db"
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	events, unsubscribe := m.Subscribe(64)
	defer unsubscribe()
	if err := m.Apply(context.Background(), Config{Profiles: []Profile{p}, WarmRefillPerSecond: 1000,
		WarmRetryBackoff: 100 * time.Millisecond, GCInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var backoffs []time.Duration
	deadline := time.After(10 * time.Second)
	for len(backoffs) < 3 {
		select {
		case ev := <-events:
			if ev.Type != EventWarmBackoff {
				continue
			}
			if ev.Profile != "w" || ev.Reason == "" {
				t.Fatalf("backoff event: %+v", ev)
			}
			backoffs = append(backoffs, ev.Duration)
		case <-deadline:
			t.Fatalf("backoff events: %v", backoffs)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if fmt.Sprint(backoffs) != fmt.Sprint(want) {
		t.Fatalf("backoffs %v, want %v", backoffs, want)
	}
	// One attempt per backoff, not a loop: the third failure's event came with the third attempt.
	d.mu.Lock()
	attempts := d.attempts
	d.mu.Unlock()
	if attempts > 4 {
		t.Fatalf("%d create attempts for 3 backoffs", attempts)
	}
	s := poolOf(t, m, "w")
	if s.BackoffUntil == nil || s.RefillFailures < 3 || s.LastError == "" || s.Ready != 0 {
		t.Fatalf("pool while backing off: %+v", s)
	}
	// Once the image is fixed, the next attempt succeeds and the pool fills.
	d.mu.Lock()
	d.failCreate = false
	d.mu.Unlock()
	waitFor(t, func() bool { s := poolOf(t, m, "w"); return s.Ready == 3 && s.LastError == "" })
}

func TestBurstIsServedPoolFirstThenColdInArrivalOrder(t *testing.T) {
	p := testProfile("w")
	p.WarmPoolSize = 2
	d := newFakeDriver(t)
	d.startDelay = 30 * time.Millisecond
	m := startTestManager(t, d, t.TempDir()+"/store.db", Config{Profiles: []Profile{p}, MaxConcurrentStarts: 1,
		WarmRefillPerSecond: 1000, GCInterval: time.Hour})
	waitFor(t, func() bool { return poolOf(t, m, "w").Ready == 2 })
	ctx := context.Background()
	var launch []string
	var cold []string
	for range 6 {
		sb, err := m.Create(ctx, CreateRequest{Profile: "w"})
		if err != nil {
			t.Fatal(err)
		}
		launch = append(launch, sb.LaunchType)
		if sb.LaunchType == LaunchCold {
			cold = append(cold, m.ContainerName(sb.ID))
		}
	}
	if launch[0] != LaunchWarm || launch[1] != LaunchWarm {
		t.Fatalf("launch types %v: the first two come from the pool", launch)
	}
	for _, l := range launch[2:] {
		if l == LaunchWarm {
			t.Fatalf("launch types %v: a ready member after the pool ran dry", launch)
		}
	}
	waitFor(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		n := 0
		for _, name := range d.names {
			for _, c := range cold {
				if name == c {
					n++
				}
			}
		}
		return n == len(cold)
	})
	d.mu.Lock()
	var got []string
	for _, name := range d.names {
		for _, c := range cold {
			if name == c {
				got = append(got, name)
			}
		}
	}
	d.mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint(cold) {
		t.Fatalf("cold creates reached the engine in order %v, arrival order %v", got, cold)
	}
}

func TestCreateWaitInABurstIsBoundedAndTyped(t *testing.T) {
	// One start slot, held by a start the engine never finishes until the gate opens: every other create of the
	// burst waits its start_timeout in line and ends with a typed timeout, however slow this machine is. Once the
	// engine moves again, the held start completes.
	d := newFakeDriver(t)
	gate := make(chan struct{})
	d.startGate = gate
	m := startTestManager(t, d, t.TempDir()+"/store.db", Config{Profiles: []Profile{testProfile("a")}, MaxConcurrentStarts: 1,
		MaxSandboxes: 4, StartTimeout: 300 * time.Millisecond, GCInterval: time.Hour})
	ctx := context.Background()
	var ids []string
	for range 4 {
		sb, err := m.Create(ctx, CreateRequest{Profile: "a"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	if _, err := m.Create(ctx, CreateRequest{Profile: "a"}); ErrorCode(err) != CodeQuotaExceeded {
		t.Fatalf("create past max_sandboxes: %v", err)
	}
	results := make(chan error, len(ids))
	for _, id := range ids {
		go func() {
			_, err := m.EnsureRunning(ctx, id)
			results <- err
		}()
	}
	for range len(ids) - 1 {
		if err := <-results; ErrorCode(err) != CodeTimeout {
			t.Fatalf("a create queued behind a stuck start: %v, want a typed timeout", err)
		}
	}
	close(gate)
	if err := <-results; err != nil && ErrorCode(err) != CodeTimeout {
		t.Fatalf("the create holding the start slot: %v, want it running (or a typed timeout)", err)
	}
}

func TestWarmClaimIsAtomic(t *testing.T) {
	p := testProfile("w")
	p.WarmPoolSize = 3
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{p}, WarmRefillPerSecond: 100})
	waitFor(t, func() bool { return m.WarmReady() == 3 })
	var wg sync.WaitGroup
	out := make([]*Sandbox, 20)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := m.Create(context.Background(), CreateRequest{Profile: "w", Owner: fmt.Sprint(i)})
			if err != nil {
				t.Error(err)
				return
			}
			out[i] = sb
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	warm := 0
	for _, sb := range out {
		if seen[sb.ID] {
			t.Fatalf("%s claimed twice", sb.ID)
		}
		seen[sb.ID] = true
		if sb.LaunchType == LaunchWarm {
			warm++
		}
	}
	if warm != 3 {
		t.Errorf("%d warm claims, want 3", warm)
	}
	// Warm members are invisible until claimed, and refill.
	items, _, _ := m.List(context.Background(), ListOptions{Limit: 100})
	if len(items) != 20 {
		t.Errorf("list shows %d sandboxes, want 20", len(items))
	}
	waitFor(t, func() bool { return m.WarmReady() == 3 })
}

func TestGlobalCapCountsWarmMembersAndEvictsThem(t *testing.T) {
	w := testProfile("w")
	w.WarmPoolSize = 2
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{w, testProfile("c")}, MaxSandboxes: 3})
	waitFor(t, func() bool { return m.WarmReady() == 2 })
	ctx := context.Background()
	a, err := m.Create(ctx, CreateRequest{Profile: "c"})
	if err != nil {
		t.Fatal(err)
	}
	// Full (1 + 2 warm): a cold create evicts a warm member instead of failing.
	if _, err := m.Create(ctx, CreateRequest{Profile: "c"}); err != nil {
		t.Fatalf("create at the cap with warm members: %v", err)
	}
	if _, err := m.Create(ctx, CreateRequest{Profile: "c"}); err != nil {
		t.Fatalf("second create at the cap: %v", err)
	}
	if _, err := m.Create(ctx, CreateRequest{Profile: "c"}); ErrorCode(err) != CodeQuotaExceeded {
		t.Fatalf("create past the cap: %v", err)
	}
	_ = m.Delete(ctx, a.ID)
	if _, err := m.Create(ctx, CreateRequest{Profile: "c"}); err != nil {
		t.Fatalf("create after a delete: %v", err)
	}
}

func TestWarmMembersAreRecycledWhenOldOrStale(t *testing.T) {
	p := testProfile("w")
	p.WarmPoolSize = 2
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{p}, WarmMaxAge: 200 * time.Millisecond, WarmRefillPerSecond: 100, GCInterval: time.Hour})
	waitFor(t, func() bool { return m.WarmReady() == 2 })
	time.Sleep(250 * time.Millisecond)
	if rep := m.CollectGarbage(context.Background()); rep.WarmRecycled != 2 {
		t.Fatalf("old members: %+v", rep)
	}
	waitFor(t, func() bool { return m.WarmReady() == 2 })
	p.Resources.Memory = "300m"
	if err := m.Apply(context.Background(), Config{Profiles: []Profile{p}, WarmRefillPerSecond: 100, GCInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		fresh := 0
		for _, c := range d.containers {
			if c.spec.Profile.Resources.Memory == "300m" && c.state.Running {
				fresh++
			}
		}
		return fresh == 2 && len(d.containers) == 2
	})
	waitFor(t, func() bool { return m.WarmReady() == 2 })
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "w"})
	if err != nil || sb.LaunchType != LaunchWarm {
		t.Fatalf("claim after a profile change: %+v %v", sb, err)
	}
}
