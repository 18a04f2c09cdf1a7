package docker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// TestSandboxContainerHardened: what the Docker engine makes of a sandbox (the conformance suite checks the
// lifecycle on every driver; this checks the Docker driver's container itself): hardening, no engine health check,
// tmpfs, the namespace's internal network, identity labels, and an environment that carries the token's digest,
// never the token.
func TestSandboxContainerHardened(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}})
	sb := h.create("small")
	tg := h.ready(sb.ID)

	info := h.inspect(sb.ID)
	hc := info.HostConfig
	if info.Config.User != "65532:65532" || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !hc.ReadonlyRootfs || hc.Privileged ||
		hc.Init == nil || !*hc.Init || hc.Memory != 256<<20 || hc.MemorySwap != hc.Memory || hc.NanoCPUs != 5e8 ||
		hc.PidsLimit == nil || *hc.PidsLimit != 128 || !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") ||
		hc.LogConfig.Config["max-size"] != "10m" || len(hc.Binds) != 0 {
		t.Fatalf("hardening not applied: user=%q %+v", info.Config.User, hc)
	}
	// Our image's HEALTHCHECK is off: the gateway probes the agent itself, and the engine's check would run a
	// process in every idle sandbox every 10 s.
	if info.Config.Healthcheck == nil || !slices.Equal(info.Config.Healthcheck.Test, []string{"NONE"}) || info.State.Health != nil {
		t.Errorf("the engine still health-checks the sandbox: %+v %+v", info.Config.Healthcheck, info.State.Health)
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
