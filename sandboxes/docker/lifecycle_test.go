package docker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

func TestCreateBecomesReadyHardened(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}})
	sb := h.create("small")
	if sb.Status != sandboxes.StatusStarting || !strings.HasPrefix(sb.ID, "sandbox-") || len(sb.ID) != len("sandbox-")+12 {
		t.Fatalf("create returned %+v", sb)
	}
	tg := h.ready(sb.ID)
	// The sandbox becomes ready by itself; EnsureRunning only waited for it.
	got, err := h.mgr.Get(context.Background(), sb.ID)
	if err != nil || got.Status != sandboxes.StatusReady || got.IdleExpiresAt != nil {
		t.Fatalf("get after ready: %+v, %v", got, err)
	}
	resp, err := http.Get("http://" + tg.Addr + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("agent /health through the target: %v %v", resp, err)
	}
	resp.Body.Close()
	if rt, ok := h.mgr.Resolve(sb.ID); !ok || rt != tg {
		t.Fatalf("Resolve = %+v %v, want %+v", rt, ok, tg)
	}

	info := h.inspect(sb.ID)
	hc := info.HostConfig
	if info.Config.User != "65532:65532" || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !hc.ReadonlyRootfs || hc.Privileged ||
		hc.Init == nil || !*hc.Init || hc.Memory != 256<<20 || hc.MemorySwap != hc.Memory || hc.NanoCPUs != 5e8 ||
		hc.PidsLimit == nil || *hc.PidsLimit != 128 || !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") ||
		hc.LogConfig.Config["max-size"] != "10m" || len(hc.Binds) != 0 {
		t.Fatalf("hardening not applied: user=%q %+v", info.Config.User, hc)
	}
	if !strings.Contains(hc.Tmpfs["/tmp"], "exec") || !strings.Contains(hc.Tmpfs["/home/sandbox"], "uid=65532") {
		t.Errorf("tmpfs mounts: %v", hc.Tmpfs)
	}
	if string(hc.NetworkMode) != h.ns+"-internal" {
		t.Errorf("network mode %q, want the namespace's internal network", hc.NetworkMode)
	}
	nw, err := h.cli.NetworkInspect(context.Background(), h.ns+"-internal", networkInspectOptions())
	if err != nil || !nw.Internal {
		t.Errorf("internal network: %+v %v", nw.Internal, err)
	}
	labels := info.Config.Labels
	if labels[h.ns+".id"] != sb.ID || labels[h.ns+".profile"] != "small" || labels[h.ns+".owner"] != "tester" ||
		labels[h.ns+".instance"] != h.mgr.Instance() || labels[h.ns+".created"] == "" {
		t.Errorf("labels: %v", labels)
	}
	env := strings.Join(info.Config.Env, "\n")
	if !strings.Contains(env, agentapi.EnvTokenDigest+"="+agentapi.TokenDigest(tg.Token)) || strings.Contains(env, tg.Token) || !strings.Contains(env, "SANDGATE_SANDBOX_ID="+sb.ID) ||
		!strings.Contains(env, "SANDGATE_CAPABILITIES=shell,python,filesystem") || len(tg.Token) < 32 {
		t.Errorf("env: %s", env)
	}
	if out, err := h.exec(sb.ID, "touch", "/etc/x"); err == nil {
		t.Errorf("root filesystem writable: %s", out)
	}
	if out, err := h.exec(sb.ID, "sh", "-c", "echo hi > /workspace/a && cat /workspace/a"); err != nil || strings.TrimSpace(out) != "hi" {
		t.Errorf("workspace not writable: %q %v", out, err)
	}

	// Another sandbox gets another token.
	other := h.create("small")
	if tg2 := h.ready(other.ID); tg2.Token == tg.Token {
		t.Error("two sandboxes share a token")
	}

	if err := h.mgr.Delete(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.mgr.Delete(context.Background(), sb.ID); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if h.containerExists(sb.ID) || h.volumeExists(h.mgr.VolumeName(sb.WorkspaceID)) {
		t.Error("container or volume left after delete")
	}
	if _, err := h.mgr.Get(context.Background(), sb.ID); sandboxes.ErrorCode(err) != sandboxes.CodeNotFound {
		t.Errorf("get after delete: %v", err)
	}
}

func TestUnknownProfileAndQuota(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}, MaxPerOwner: 1, MaxSandboxes: 2})
	_, err := h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "nope"})
	var se *sandboxes.Error
	if !errors.As(err, &se) || se.Code != sandboxes.CodeUnknownProfile {
		t.Fatalf("unknown profile: %v", err)
	}
	h.create("small")
	if _, err := h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "small", Owner: "tester"}); sandboxes.ErrorCode(err) != sandboxes.CodeQuotaExceeded {
		t.Fatalf("per-owner cap: %v", err)
	}
	if _, err := h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "small", Owner: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "small", Owner: "c"}); sandboxes.ErrorCode(err) != sandboxes.CodeQuotaExceeded {
		t.Fatalf("global cap: %v", err)
	}
}

func TestIdleStopThenRestartOnSameWorkspace(t *testing.T) {
	p := smallProfile("idle", "")
	p.IdleTimeout = sandboxes.Duration(time.Second)
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour})
	sb := h.create("idle")
	h.ready(sb.ID)
	before := h.inspect(sb.ID).ID
	if out, err := h.exec(sb.ID, "sh", "-c", "echo kept > /workspace/file.txt"); err != nil {
		t.Fatalf("%s %v", out, err)
	}
	h.pastIdleDeadline(sb.ID)
	rep := h.mgr.CollectGarbage(context.Background())
	if rep.IdleStopped != 1 {
		t.Fatalf("gc report %+v", rep)
	}
	got, _ := h.mgr.Get(context.Background(), sb.ID)
	if got.Status != sandboxes.StatusIdle {
		t.Fatalf("status after idle stop: %s", got.Status)
	}
	if h.inspect(sb.ID).State.Running {
		t.Fatal("container still running after idle stop")
	}
	if _, ok := h.mgr.Resolve(sb.ID); ok {
		t.Fatal("Resolve answers for a stopped sandbox")
	}
	// Keepalive never starts compute.
	if err := h.mgr.Keepalive(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if h.inspect(sb.ID).State.Running {
		t.Fatal("keepalive started the container")
	}
	tg := h.ready(sb.ID)
	if h.inspect(sb.ID).ID != before {
		t.Error("restart made a new container")
	}
	if out, err := h.exec(sb.ID, "cat", "/workspace/file.txt"); err != nil || strings.TrimSpace(out) != "kept" {
		t.Fatalf("workspace after restart: %q %v", out, err)
	}
	if resp, err := http.Get("http://" + tg.Addr + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health after restart: %v", err)
	}
	// A lease keeps it from being idle-stopped.
	release, err := h.mgr.Acquire(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.pastIdleDeadline(sb.ID)
	if rep := h.mgr.CollectGarbage(context.Background()); rep.IdleStopped != 0 {
		t.Fatalf("a leased sandbox was stopped: %+v", rep)
	}
	release()
	// Explicit stop is idempotent.
	if err := h.mgr.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.mgr.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
}

// pastIdleDeadline returns once the sandbox's idle deadline, as the Manager reports it, has passed: the collector
// then counts it idle unless a lease holds it. (A fixed sleep would guess at how long the steps before took.)
func (h *harness) pastIdleDeadline(id string) {
	h.t.Helper()
	got, err := h.mgr.Get(context.Background(), id)
	if err != nil || got.IdleExpiresAt == nil {
		h.t.Fatalf("no idle deadline for %s: %+v %v", id, got, err)
	}
	if wait := time.Until(*got.IdleExpiresAt); wait > 0 {
		time.Sleep(wait + 10*time.Millisecond)
	}
}

// TestTTLExpiryRemovesContainerAndVolume: an extension moves the deadline by exactly what was asked; once the TTL
// passes the sandbox reads expired, refuses to start or extend, and GC removes its container and volume. Nothing here
// races the clock: the extension works on a sandbox whose TTL outlives the test, and the short-TTL sandbox is only
// observed after it expired (however long its creation took on a busy machine).
func TestTTLExpiryRemovesContainerAndVolume(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}, GCInterval: time.Hour})
	ctx := context.Background()
	long, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	extended, err := h.mgr.ExtendTTL(ctx, long.ID, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := extended.ExpiresAt.Sub(*long.ExpiresAt); got != time.Second {
		t.Fatalf("extend by 1s moved the deadline by %s", got)
	}
	forever, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", TTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.ExtendTTL(ctx, forever.ID, time.Second); sandboxes.ErrorCode(err) != sandboxes.CodeTTLInfinite {
		t.Fatalf("extend infinite: %v", err)
	}

	sb, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the state, not for a time: the status turns expired once the deadline has passed.
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		got, _ := h.mgr.Get(ctx, sb.ID)
		if got != nil && got.Status == sandboxes.StatusExpired {
			break
		}
		select {
		case <-waitCtx.Done():
			t.Fatalf("status %+v, never expired", got)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := h.mgr.EnsureRunning(ctx, sb.ID); sandboxes.ErrorCode(err) != sandboxes.CodeExpired {
		t.Fatalf("ensure running expired: %v", err)
	}
	if _, err := h.mgr.ExtendTTL(ctx, sb.ID, time.Hour); sandboxes.ErrorCode(err) != sandboxes.CodeExpired {
		t.Fatalf("extend expired: %v", err)
	}
	if rep := h.mgr.CollectGarbage(ctx); rep.Expired != 1 {
		t.Fatalf("gc %+v", rep)
	}
	if h.containerExists(sb.ID) || h.volumeExists(h.mgr.VolumeName(sb.WorkspaceID)) {
		t.Fatal("expired sandbox left its container or volume")
	}
	// Creates return before their containers exist: on a busy engine the two may still be queued for a start
	// slot when the collector runs. Wait for them, then check the collector left them alone.
	for _, id := range []string{long.ID, forever.ID} {
		if _, err := h.mgr.EnsureRunning(ctx, id); err != nil {
			t.Fatalf("a sandbox whose TTL has not passed: %v", err)
		}
	}
	if !h.containerExists(forever.ID) || !h.containerExists(long.ID) {
		t.Fatal("a sandbox whose TTL has not passed was collected")
	}
}

func TestWarmClaimUnderConcurrentCreates(t *testing.T) {
	p := smallProfile("warm", "")
	p.WarmPoolSize = 5
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, WarmRefillPerSecond: 50})
	deadline := time.Now().Add(2 * time.Minute)
	for h.mgr.Stats()["warm"] < 5 || warmReady(h) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("warm pool not filled: %v", h.mgr.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Env at claim time forces a cold create.
	withEnv, err := h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "warm", Env: map[string]string{"A": "1"}})
	if err != nil || withEnv.LaunchType != sandboxes.LaunchCold {
		t.Fatalf("create with env: %+v %v", withEnv, err)
	}
	var wg sync.WaitGroup
	results := make([]*sandboxes.Sandbox, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "warm", Owner: fmt.Sprint("o", i)})
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	warm := 0
	for i, sb := range results {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if ids[sb.ID] {
			t.Fatalf("sandbox %s handed out twice", sb.ID)
		}
		ids[sb.ID] = true
		if sb.LaunchType == sandboxes.LaunchWarm {
			warm++
			if sb.Status != sandboxes.StatusReady {
				t.Errorf("warm claim %s is %s", sb.ID, sb.Status)
			}
		}
	}
	if warm != 5 {
		t.Errorf("%d warm claims, want 5", warm)
	}
	containers := map[string]bool{}
	for id := range ids {
		h.ready(id)
		cid := h.inspect(id).ID
		if containers[cid] {
			t.Fatalf("two sandboxes share container %s", cid)
		}
		containers[cid] = true
		if got, _ := h.mgr.Get(context.Background(), id); got.Status != sandboxes.StatusReady {
			t.Errorf("%s is %s", id, got.Status)
		}
	}
	// The pool refills.
	deadline = time.Now().Add(2 * time.Minute)
	for warmReady(h) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("warm pool not refilled: %v", h.mgr.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A changed profile shape replaces the stale members.
	p.Resources.Memory = "200m"
	p.Image = h.image
	if err := h.mgr.Apply(context.Background(), sandboxes.Config{Profiles: []sandboxes.Profile{p}, WarmRefillPerSecond: 50}); err != nil {
		t.Fatal(err)
	}
	h.mgr.CollectGarbage(context.Background())
	sb := h.create("warm")
	h.ready(sb.ID)
	if mem := h.inspect(sb.ID).HostConfig.Memory; mem != 200<<20 {
		t.Errorf("create after a profile change got memory %d (stale warm member)", mem)
	}
}

func warmReady(h *harness) int { return h.mgr.WarmReady() }

func TestOrphansAreSwept(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}, GCInterval: time.Hour, OrphanMinAge: time.Nanosecond})
	live := h.create("small")
	h.ready(live.ID)
	ns, inst := h.ns, h.mgr.Instance()
	orphanVol := ns + "-ws-0123456789ab"
	run := func(args ...string) {
		if out, err := execCommand("docker", args...); err != nil {
			t.Fatalf("docker %v: %v %s", args, err, out)
		}
	}
	run("volume", "create", "--label", ns+".managed=true", "--label", ns+".instance="+inst, "--label", ns+".managed_workspace=true", orphanVol)
	run("create", "--name", ns+"-sandbox-0123456789ab", "--label", ns+".managed=true", "--label", ns+".instance="+inst,
		"--label", ns+".id=sandbox-0123456789ab", h.image)
	rep := h.mgr.CollectGarbage(context.Background())
	if rep.OrphanContainers != 1 || rep.OrphanVolumes != 1 {
		t.Fatalf("gc %+v", rep)
	}
	if h.volumeExists(orphanVol) {
		t.Error("orphan volume left")
	}
	if _, err := h.cli.ContainerInspect(context.Background(), ns+"-sandbox-0123456789ab"); err == nil {
		t.Error("orphan container left")
	}
	if !h.containerExists(live.ID) || !h.volumeExists(h.mgr.VolumeName(live.WorkspaceID)) {
		t.Error("the sweep removed a live sandbox")
	}
}

func TestCrashReasons(t *testing.T) {
	p := smallProfile("small", "")
	p.Resources.Memory = "128m"
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}})
	events, unsubscribe := h.mgr.Subscribe(64)
	defer unsubscribe()
	killed := h.create("small")
	oom := h.create("small")
	h.ready(killed.ID)
	h.ready(oom.ID)

	if out, err := execCommand("docker", "kill", h.containerName(killed.ID)); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	ev := h.waitEvent(events, 30*time.Second, func(e sandboxes.Event) bool { return e.SandboxID == killed.ID && e.Type == sandboxes.EventDied })
	if ev.Reason != "sigkill" || ev.Death == nil || ev.Death.ExitCode != 137 {
		t.Fatalf("kill reported as %+v", ev)
	}
	// A dead sandbox reads idle with the reason; its next use starts the rebuild and says why it is not ready.
	if got, _ := h.mgr.Get(context.Background(), killed.ID); got.Status != sandboxes.StatusIdle || got.Died == nil || !strings.Contains(got.LastError, "sigkill") {
		t.Fatalf("status after kill: %+v", got)
	}
	_, err := h.mgr.EnsureRunning(context.Background(), killed.ID)
	var se *sandboxes.Error
	if !errors.As(err, &se) || se.Code != sandboxes.CodeNotReady || se.Details["reason"] != "sigkill" || se.Hint != sandboxes.HintRecovering {
		t.Fatalf("next use after kill: %#v", err)
	}
	h.waitEvent(events, 90*time.Second, func(e sandboxes.Event) bool {
		return e.SandboxID == killed.ID && e.Type == sandboxes.EventReady && e.Reason == "recovered"
	})
	h.ready(killed.ID)

	// A python allocation beyond the memory limit: the kernel OOM-kills it inside the sandbox.
	out, _ := h.exec(oom.ID, "python3", "-c", "b = bytearray(512*1024*1024); print(len(b))")
	ev = h.waitEvent(events, 30*time.Second, func(e sandboxes.Event) bool {
		return e.SandboxID == oom.ID && (e.Type == sandboxes.EventOOM || e.Type == sandboxes.EventDied)
	})
	if ev.Reason != "oom" {
		t.Fatalf("OOM reported as %+v (exec output %q)", ev, out)
	}
}

func TestCreateDeleteCyclesLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}, GCInterval: time.Hour})
	const cycles = 200
	for i := range cycles {
		sb := h.create("small")
		if i%4 == 0 {
			h.ready(sb.ID)
		}
		if err := h.mgr.Delete(context.Background(), sb.ID); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	if c, v := h.counts(); c != 0 || v != 0 {
		t.Fatalf("%d containers and %d volumes left after %d cycles", c, v, cycles)
	}
	if st := h.mgr.Stats(); len(st) != 0 {
		t.Fatalf("manager still holds %v", st)
	}
}
