package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	base := func(mut func(p *Profile)) Config {
		p := testProfile("p")
		mut(&p)
		return Config{Profiles: []Profile{p}}
	}
	tests := []struct {
		name  string
		cfg   Config
		binds bool
		want  string
	}{
		{"defaults", base(func(*Profile) {}), false, ""},
		{"network none", base(func(p *Profile) { p.Network = NetworkNone }), false, ""},
		{"host_port on none", base(func(p *Profile) { p.ConnectMode, p.Network = ConnectHostPort, NetworkNone }), false, "none network cannot carry"},
		{"host_port on internal", base(func(p *Profile) { p.ConnectMode = ConnectHostPort }), false, "internal or none network cannot carry"},
		{"host_port on bridge", base(func(p *Profile) { p.ConnectMode, p.Network = ConnectHostPort, NetworkBridge }), false, ""},
		{"binds refused", base(func(p *Profile) { p.Binds = []string{"/srv:/srv"} }), false, "allow_host_binds"},
		{"binds allowed", base(func(p *Profile) { p.Binds = []string{"/srv:/srv:ro"} }), true, ""},
		{"docker socket", base(func(p *Profile) { p.Binds = []string{"/var/run/docker.sock:/var/run/docker.sock"} }), true, "container engine"},
		{"bind over workspace", base(func(p *Profile) { p.Binds = []string{"/srv:/workspace"} }), true, "hides the workspace"},
		{"relative bind", base(func(p *Profile) { p.Binds = []string{"srv:/srv"} }), true, "must be"},
		{"duplicate", Config{Profiles: []Profile{testProfile("a"), testProfile("a")}}, false, "defined twice"},
		{"negative cap", Config{MaxSandboxes: -1}, false, "negative"},
		{"bad memory", base(func(p *Profile) { p.Resources.Memory = "lots" }), false, "memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AllowHostBinds = tt.binds
			err := tt.cfg.Validate()
			if tt.want == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestApplyRefusesInvalidConfigAndKeepsTheOld(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	bad := testProfile("b")
	bad.Network, bad.ConnectMode = NetworkNone, ConnectHostPort
	if err := m.Apply(context.Background(), Config{Profiles: []Profile{bad}}); ErrorCode(err) != CodeInvalid {
		t.Fatalf("apply: %v", err)
	}
	if _, ok := m.Profile("a"); !ok {
		t.Fatal("a refused config replaced the profiles")
	}
}

func TestCreateRejectsBadInputWithoutSideEffects(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	tests := []struct {
		req  CreateRequest
		code string
	}{
		{CreateRequest{Profile: "nope"}, CodeUnknownProfile},
		{CreateRequest{Profile: "a", Env: map[string]string{"A=B": "x"}}, CodeInvalid},
		{CreateRequest{Profile: "a", WorkspaceID: "../../etc"}, CodeInvalid},
	}
	for _, tt := range tests {
		_, err := m.Create(context.Background(), tt.req)
		if ErrorCode(err) != tt.code {
			t.Errorf("%+v: %v, want %s", tt.req, err, tt.code)
		}
	}
	var se *Error
	_, err := m.Create(context.Background(), CreateRequest{Profile: "nope"})
	if !errors.As(err, &se) || fmt.Sprint(se.Details["profiles"]) != "[a]" {
		t.Errorf("unknown profile details: %#v", err)
	}
	if c, v := d.count(); c != 0 || v != 0 {
		t.Errorf("bad requests created %d containers, %d volumes", c, v)
	}
	if items, _, _ := m.List(context.Background(), ListOptions{}); len(items) != 0 {
		t.Errorf("bad requests left %d sandboxes", len(items))
	}
}

func TestStatusIsComputedOnRead(t *testing.T) {
	p := testProfile("a")
	p.IdleTimeout = Duration(time.Hour)
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{p}})
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: 300 * time.Millisecond})
	if err != nil || sb.Status != StatusStarting || sb.LaunchType != LaunchCold {
		t.Fatalf("create: %+v %v", sb, err)
	}
	mustReady(t, m, sb.ID)
	got, _ := m.Get(ctx, sb.ID)
	if got.Status != StatusReady || got.IdleExpiresAt == nil {
		t.Fatalf("after ready: %+v", got)
	}
	if err := m.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ = m.Get(ctx, sb.ID); got.Status != StatusIdle || got.IdleExpiresAt != nil {
		t.Fatalf("after stop: %+v", got)
	}
	time.Sleep(350 * time.Millisecond)
	if got, _ = m.Get(ctx, sb.ID); got.Status != StatusExpired {
		t.Fatalf("after ttl: %+v", got)
	}
	if m.Exists(sb.ID) {
		t.Error("an expired sandbox exists")
	}

	d.mu.Lock()
	d.failCreate = true
	d.mu.Unlock()
	failed, _ := m.Create(ctx, CreateRequest{Profile: "a"})
	_, err = m.EnsureRunning(ctx, failed.ID)
	if err == nil {
		t.Fatal("a sandbox whose container cannot be created became ready")
	}
	if got, _ = m.Get(ctx, failed.ID); got.Status != StatusFailed || !strings.Contains(got.LastError, "no such image") {
		t.Fatalf("failed create: %+v", got)
	}
}

func TestExtendTTL(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	got, err := m.ExtendTTL(ctx, sb.ID, time.Hour)
	if err != nil || got.ExpiresAt.Sub(*sb.ExpiresAt) != time.Hour {
		t.Fatalf("extend: %+v %v", got, err)
	}
	if _, err := m.ExtendTTL(ctx, sb.ID, 0); ErrorCode(err) != CodeInvalid {
		t.Errorf("extend by 0: %v", err)
	}
	forever, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: -1})
	if _, err := m.ExtendTTL(ctx, forever.ID, time.Hour); ErrorCode(err) != CodeTTLInfinite {
		t.Errorf("extend infinite: %v", err)
	}
	if _, err := m.ExtendTTL(ctx, "sandbox-000000000000", time.Hour); ErrorCode(err) != CodeNotFound {
		t.Errorf("extend missing: %v", err)
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

func TestDeathIsRecoveredThenCrashLoopStaysFailed(t *testing.T) {
	p := testProfile("a")
	p.CrashLimit = 2
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{p}})
	events, stop := m.Subscribe(64)
	defer stop()
	ctx := context.Background()
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a"})
	mustReady(t, m, sb.ID)
	containerID := func() string {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.entries[sb.ID].rec.ContainerID
	}
	nextEvent := func(typ string) Event {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Type == typ && ev.SandboxID == sb.ID {
					return ev
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no %s event", typ)
			}
		}
	}
	for death := 1; death <= 2; death++ {
		cid := containerID()
		d.die(cid, 139, false)
		ev := nextEvent(EventDied)
		if ev.Reason != "sigsegv" || ErrorCode(ev.Err()) != CodeContainerDied {
			t.Fatalf("death %d: event %+v", death, ev)
		}
		got, _ := m.Get(ctx, sb.ID)
		if got.Status != StatusIdle || !strings.Contains(got.LastError, "sigsegv") || got.Died == nil {
			t.Fatalf("death %d: after the death the sandbox reads %+v", death, got)
		}
		// The first call after the death answers a retryable session_not_ready naming the reason and starts the
		// rebuild on the same workspace; once it is ready calls succeed on the same sandbox.
		_, err := m.EnsureRunning(ctx, sb.ID)
		var se *Error
		if !errors.As(err, &se) || se.Code != CodeNotReady || se.Details["reason"] != "sigsegv" || se.Details["recovering"] != true {
			t.Fatalf("death %d: first call after the death: %#v", death, err)
		}
		if ev := nextEvent(EventRecovering); ev.Reason != "sigsegv" {
			t.Fatalf("recovering event %+v", ev)
		}
		if ev := nextEvent(EventReady); ev.Reason != "recovered" {
			t.Fatalf("ready event %+v", ev)
		}
		tg := mustReady(t, m, sb.ID)
		if tg.SandboxID != sb.ID {
			t.Fatalf("target %+v", tg)
		}
		got, _ = m.Get(ctx, sb.ID)
		if got.Status != StatusReady || got.WorkspaceID != sb.WorkspaceID || !strings.Contains(got.LastError, "sigsegv") || got.Died != nil {
			t.Fatalf("death %d: after the rebuild the sandbox reads %+v", death, got)
		}
		if containerID() != cid {
			t.Fatalf("the rebuild made a new container %s instead of restarting %s", containerID(), cid)
		}
	}
	// A third death within the window passes the limit of 2: the sandbox stays failed with the reason.
	d.die(containerID(), 137, true)
	nextEvent(EventDied)
	if ev := nextEvent(EventFailed); ev.Reason != "crash_loop" {
		t.Fatalf("failed event %+v", ev)
	}
	got, _ := m.Get(ctx, sb.ID)
	if got.Status != StatusFailed || !strings.Contains(got.LastError, "crash loop") || got.Died == nil || got.Died.Reason != "oom" {
		t.Fatalf("after the crash loop the sandbox reads %+v", got)
	}
	_, err := m.EnsureRunning(ctx, sb.ID)
	var se *Error
	if !errors.As(err, &se) || se.Code != CodeContainerDied || se.Hint != HintContainerDied || se.Details["reason"] != "oom" || se.Details["crashes"] != 3 {
		t.Fatalf("ensure running a crash-looped sandbox: %#v", err)
	}
	if err := m.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get(ctx, sb.ID); got.Status != StatusFailed {
		t.Fatalf("a stop made a crash-looped sandbox %s", got.Status)
	}
	if _, ok := m.Resolve(sb.ID); ok {
		t.Error("a dead sandbox resolves")
	}
}

func TestCrashLimitNegativeFailsAtTheFirstDeath(t *testing.T) {
	p := testProfile("a")
	p.CrashLimit = -1
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{p}})
	sb, _ := m.Create(context.Background(), CreateRequest{Profile: "a"})
	mustReady(t, m, sb.ID)
	m.mu.RLock()
	cid := m.entries[sb.ID].rec.ContainerID
	m.mu.RUnlock()
	d.die(cid, 1, false)
	waitFor(t, func() bool { got, _ := m.Get(context.Background(), sb.ID); return got.Status == StatusFailed })
	if _, err := m.EnsureRunning(context.Background(), sb.ID); ErrorCode(err) != CodeContainerDied {
		t.Fatalf("ensure running: %v", err)
	}
}

func TestClassifyDeath(t *testing.T) {
	now := time.Now()
	tests := []struct {
		code    int
		oom     bool
		lastOOM time.Time
		reason  string
		message string
	}{
		{137, true, time.Time{}, "oom", "out-of-memory"},
		{137, false, now.Add(-time.Second), "oom", "out-of-memory"},
		{137, false, time.Time{}, "sigkill", "SIGKILL"},
		{139, false, time.Time{}, "sigsegv", "SIGSEGV"},
		{143, false, time.Time{}, "sigterm", "SIGTERM"},
		{3, false, time.Time{}, "exit", "exit 3"},
		{0, false, time.Time{}, "exit", "exit 0"},
	}
	for _, tt := range tests {
		d := classifyDeath(tt.code, tt.oom, tt.lastOOM, now)
		if d.Reason != tt.reason || !strings.Contains(d.Message, tt.message) || d.ExitCode != tt.code {
			t.Errorf("classify(%d, %v): %+v", tt.code, tt.oom, d)
		}
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	for i := range 5 {
		owner := "x"
		if i%2 == 0 {
			owner = "y"
		}
		if _, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	var all []*Sandbox
	cursor := ""
	for page := 0; ; page++ {
		items, next, err := m.List(ctx, ListOptions{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, items...)
		if next == "" {
			break
		}
		cursor = next
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if len(all) != 5 {
		t.Fatalf("%d sandboxes over all pages", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt) {
			t.Error("not newest first")
		}
	}
	if items, _, _ := m.List(ctx, ListOptions{Owner: "y"}); len(items) != 3 {
		t.Errorf("owner filter: %d", len(items))
	}
	if _, _, err := m.List(ctx, ListOptions{Cursor: "!!"}); ErrorCode(err) != CodeInvalid {
		t.Errorf("bad cursor: %v", err)
	}
}

func TestLeaseKeepsAnExpiredSandboxFromTheCollector(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}, GCInterval: time.Hour})
	ctx := context.Background()
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: 100 * time.Millisecond})
	mustReady(t, m, sb.ID)
	release, err := m.Acquire(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if rep := m.CollectGarbage(ctx); rep.Expired != 0 {
		t.Fatalf("collected a leased sandbox: %+v", rep)
	}
	release()
	release() // a second release does nothing
	if rep := m.CollectGarbage(ctx); rep.Expired != 1 {
		t.Fatalf("gc after release: %+v", rep)
	}
	if c, v := d.count(); c != 0 || v != 0 {
		t.Errorf("expiry left %d containers, %d volumes", c, v)
	}
	if _, err := m.Acquire(sb.ID); ErrorCode(err) != CodeNotFound {
		t.Errorf("acquire a removed sandbox: %v", err)
	}
}

func TestRestartAdoptsFromTheStore(t *testing.T) {
	p := testProfile("a")
	p.IdleTimeout = Duration(time.Hour)
	cfg := Config{Profiles: []Profile{p}}
	d := newFakeDriver(t)
	path := t.TempDir() + "/store.db"
	m := startTestManager(t, d, path, cfg)
	ctx := context.Background()
	kept, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	lost, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	mustReady(t, m, kept.ID)
	mustReady(t, m, lost.ID)
	before, _ := m.Get(ctx, kept.ID)
	m.mu.RLock()
	keptCID, lostCID := m.entries[kept.ID].rec.ContainerID, m.entries[lost.ID].rec.ContainerID
	m.mu.RUnlock()
	instance := m.Instance()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if c, _ := d.count(); c != 2 {
		t.Fatalf("Close removed containers: %d left", c)
	}
	_ = d.Remove(ctx, lostCID)

	m2 := startTestManager(t, d, path, cfg)
	if m2.Instance() != instance {
		t.Errorf("instance changed across restarts: %s -> %s", instance, m2.Instance())
	}
	waitFor(t, func() bool { g, _ := m2.Get(ctx, kept.ID); return g != nil && g.Status == StatusReady })
	after, _ := m2.Get(ctx, kept.ID)
	if !after.ExpiresAt.Equal(*before.ExpiresAt) || !after.IdleExpiresAt.Equal(*before.IdleExpiresAt) {
		t.Errorf("deadlines changed: %v/%v -> %v/%v", before.ExpiresAt, before.IdleExpiresAt, after.ExpiresAt, after.IdleExpiresAt)
	}
	m2.mu.RLock()
	cid := m2.entries[kept.ID].rec.ContainerID
	m2.mu.RUnlock()
	if cid != keptCID {
		t.Errorf("adopted sandbox has container %s, was %s", cid, keptCID)
	}
	// A container that vanished while the gateway was down is a death: the next use rebuilds it.
	gone, _ := m2.Get(ctx, lost.ID)
	if gone.Status != StatusIdle || gone.Died == nil || gone.Died.Reason != "removed" || !strings.Contains(gone.LastError, "removed") {
		t.Errorf("sandbox whose container vanished: %+v", gone)
	}
	if _, err := m2.EnsureRunning(ctx, lost.ID); ErrorCode(err) != CodeNotReady {
		t.Fatalf("first use of the vanished sandbox: %v", err)
	}
	waitFor(t, func() bool { sb, _ := m2.Get(ctx, lost.ID); return sb.Status == StatusReady })
	mustReady(t, m2, lost.ID)
}

func TestBoltStoreRoundTrip(t *testing.T) {
	s := NewBoltStore(t.TempDir() + "/sub/dir/store.db")
	defer s.Close()
	exp := time.Now().Add(time.Hour).Round(0)
	rec := Record{ID: "sandbox-000000000001", Profile: "a", Token: "t", ExpiresAt: &exp, Phase: PhaseRunning, Generation: 2}
	if err := s.Put(rec); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("instance", "abc"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil || len(got) != 1 || got[0].ID != rec.ID || !got[0].ExpiresAt.Equal(exp) || got[0].Generation != 2 {
		t.Fatalf("load: %+v %v", got, err)
	}
	if v, _ := s.Meta("instance"); v != "abc" {
		t.Errorf("meta %q", v)
	}
	if err := s.Delete(rec.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(); len(got) != 0 {
		t.Errorf("delete left %d", len(got))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
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

func TestEnsureRunningWaitIsBounded(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}, StartTimeout: 100 * time.Millisecond})
	d.startDelay = time.Second
	sb, _ := m.Create(context.Background(), CreateRequest{Profile: "a"})
	start := time.Now()
	_, err := m.EnsureRunning(context.Background(), sb.ID)
	if ErrorCode(err) != CodeTimeout || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("ensure running a slow start: %v after %s", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m.EnsureRunning(ctx, sb.ID); ErrorCode(err) != CodeTimeout {
		t.Fatalf("ensure running with a short context: %v", err)
	}
}

func TestStopDuringStartEndsIdle(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	d.startDelay = 300 * time.Millisecond
	sb, _ := m.Create(context.Background(), CreateRequest{Profile: "a"})
	time.Sleep(50 * time.Millisecond)
	if err := m.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Get(context.Background(), sb.ID)
	if got.Status != StatusIdle {
		t.Fatalf("status after stopping a starting sandbox: %+v", got)
	}
	d.startDelay = 0
	mustReady(t, m, sb.ID)
}

// TestRelaunchAfterStartupFailure: a call right after a sandbox turns failed starts it again and meets the agent's
// start-up failure, never the name of the failed container that is still being removed.
func TestRelaunchAfterStartupFailure(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	d.mu.Lock()
	d.startupFailure = "pip: No matching distribution found for nope"
	d.removeDelay = 200 * time.Millisecond
	d.mu.Unlock()
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := m.Get(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == StatusFailed {
				if !strings.HasPrefix(got.LastError, CodeStartupFailed+": ") || !strings.Contains(got.LastError, "No matching distribution") {
					t.Fatalf("last error %q", got.LastError)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("status %s, want failed", got.Status)
			}
			if i == 0 {
				// The first launch starts by itself; later ones only when called.
				time.Sleep(5 * time.Millisecond)
				continue
			}
			t.Fatalf("status %s after a failed relaunch, want failed", got.Status)
		}
		_, err := m.EnsureRunning(ctx, sb.ID)
		var se *Error
		if !errors.As(err, &se) || se.Code != CodeStartupFailed || !strings.Contains(se.Message, "No matching distribution") ||
			se.Details["last_error"] != strings.TrimPrefix(se.Message, "sandbox "+sb.ID+" could not be started: ") {
			t.Fatalf("relaunch %d of a failed sandbox: %v (%+v)", i+1, err, se)
		}
	}
}
