package docker_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// engineOutage is how long TestEngineSocketGone keeps the engine's socket away: SANDGATE_ENGINE_OUTAGE (a Go
// duration) when set, else the 60 s. The behaviour under test does not depend on the length: nothing in the
// Manager or the driver keys on it (a call fails at once on the missing socket, the event stream resubscribes every
// second), so SANDGATE_ENGINE_OUTAGE=5s shows the same thing sooner; 60 s costs wall time, not CPU.
func engineOutage(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("SANDGATE_ENGINE_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SANDGATE_ENGINE_OUTAGE=%q: want a positive Go duration", v)
		}
		return d
	}
	return 60 * time.Second
}

// TestEngineSocketGone takes the engine's socket away under a running Manager (a proxy socket the test owns; the
// shared engine itself is never touched) for engineOutage, and brings it back. During the outage a running
// sandbox keeps serving through its agent (no engine call on that path), and a create answers a typed engine error
// promptly instead of hanging. Afterwards, with no restart of anything: creates work again, the running sandbox
// still has its files, the sandbox whose create failed starts on its next use, and a container that dies after the
// outage is still noticed (the event stream was resubscribed).
func TestEngineSocketGone(t *testing.T) {
	outage := engineOutage(t)
	proxy := testenv.StartEngineProxy(t, "")
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("p", "")}}
	h := newHarnessOn(t, cfg, testenv.Image(t, "base"), proxy.Host())
	ctx, cancel := context.WithTimeout(context.Background(), outage+4*time.Minute)
	defer cancel()
	sb := h.create("p")
	tg := h.ready(sb.ID)
	agent := agentapi.NewClientFor(tg.Addr, tg.Token, h.mgr.AgentHTTPClient())
	if res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: "echo before > kept.txt"}); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("writing a file: %+v %v", res, err)
	}

	proxy.Down()
	down := time.Now()
	t.Logf("engine socket gone for %s", outage)
	// A running sandbox serves on: its request path makes no engine call.
	tg2, err := h.mgr.EnsureRunning(ctx, sb.ID)
	if err != nil {
		t.Fatalf("a running sandbox during the outage: %v", err)
	}
	if res, err := agentapi.NewClientFor(tg2.Addr, tg2.Token, h.mgr.AgentHTTPClient()).Exec(ctx, agentapi.ExecRequest{Cmd: "cat kept.txt && echo during >> kept.txt"}); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("an exec during the outage: %+v %v", res, err)
	}
	// A create fails promptly with the typed engine error (at Create or at its start).
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	began := time.Now()
	lost, err := h.mgr.Create(cctx, sandboxes.CreateRequest{Profile: "p", Owner: "tester"})
	if err == nil {
		_, err = h.mgr.EnsureRunning(cctx, lost.ID)
	}
	ccancel()
	t.Logf("a create during the outage answered in %s: %v", time.Since(began).Round(time.Millisecond), err)
	if code := sandboxes.ErrorCode(err); code != sandboxes.CodeEngine && code != sandboxes.CodeStartupFailed {
		t.Fatalf("a create during the outage: %v (code %q), want a typed engine failure", err, code)
	}
	if time.Since(began) > 20*time.Second {
		t.Errorf("a create during the outage took %s to fail", time.Since(began))
	}

	// The rest of the outage: its length is the fault itself, not a wait for a state.
	select {
	case <-time.After(time.Until(down.Add(outage))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	proxy.Up()

	// Back: a create works, with no restart of the Manager.
	back := h.create("p")
	h.ready(back.ID)
	tg3 := h.ready(sb.ID)
	res, err := agentapi.NewClientFor(tg3.Addr, tg3.Token, h.mgr.AgentHTTPClient()).Exec(ctx, agentapi.ExecRequest{Cmd: "cat kept.txt"})
	if err != nil || strings.TrimSpace(res.Stdout) != "before\nduring" {
		t.Fatalf("the running sandbox's file after the outage: %+v %v", res, err)
	}
	if lost != nil {
		h.ready(lost.ID) // the sandbox whose start failed during the outage starts on its next use
	}
	// The event stream is back: a container killed now is noticed as a death.
	events, stop := h.mgr.Subscribe(64)
	defer stop()
	if err := h.cli.ContainerKill(ctx, h.containerName(back.ID), "KILL"); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(events, time.Minute, func(ev sandboxes.Event) bool {
		return ev.SandboxID == back.ID && ev.Type == sandboxes.EventDied
	})
}

// TestEngineKilledDuringCreates kills the engine (dockerd, SIGKILL, not a clean stop) of a running Manager in the
// middle of a burst of creates, on a private engine of the test's own (testenv.PrivateEngine; the shared engine
// is never touched), then starts the engine again. Every create of the burst ends promptly, created or with a
// typed error, none hangs; with no restart of the Manager, every sandbox of the burst and one that ran before the
// kill come back on their next use (the one that ran with its files), new creates work, a death is still noticed,
// and deleting them all leaves nothing on the engine.
func TestEngineKilledDuringCreates(t *testing.T) {
	image := testenv.Image(t, "base")
	began := time.Now()
	pe := testenv.StartPrivateEngine(t, image)
	t.Logf("private engine up with %s loaded in %s", image, time.Since(began).Round(time.Millisecond))
	cli := pe.Client()
	defer cli.Close()
	p := smallProfile("p", image)
	p.Network = sandboxes.NetworkNone // the private engine makes no bridge
	h := newHarnessOn(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}}, image, pe.Host())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	before := h.create("p")
	tg := h.ready(before.ID)
	if res, err := agentapi.NewClientFor(tg.Addr, tg.Token, h.mgr.AgentHTTPClient()).Exec(ctx, agentapi.ExecRequest{Cmd: "echo kept > kept.txt"}); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("writing a file: %+v %v", res, err)
	}

	const burst = 6
	type outcome struct {
		id  string
		err error
		at  time.Time
	}
	results := make(chan outcome, burst)
	for range burst {
		go func() {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
			defer ccancel()
			sb, err := h.mgr.Create(cctx, sandboxes.CreateRequest{Profile: "p", Owner: "tester"})
			if err != nil {
				results <- outcome{err: err, at: time.Now()}
				return
			}
			_, err = h.mgr.EnsureRunning(cctx, sb.ID)
			results <- outcome{id: sb.ID, err: err, at: time.Now()}
		}()
	}
	// Kill once the burst has reached the engine: the first of its containers exists.
	f := filters.NewArgs(filters.Arg("label", h.ns+".managed"))
	for {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 1 { // the one made before, and one of the burst
			t.Logf("killing the engine with %d containers of the burst made", len(list)-1)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the burst never reached the engine")
		case <-time.After(5 * time.Millisecond):
		}
	}
	killed := time.Now()
	pe.Kill()
	var ids []string
	failed := 0
	for range burst {
		r := <-results
		if r.id != "" {
			ids = append(ids, r.id)
		}
		if r.err != nil {
			failed++
			code := sandboxes.ErrorCode(r.err)
			t.Logf("a create of the burst: %s after the kill: %v", r.at.Sub(killed).Round(time.Millisecond), r.err)
			if code != sandboxes.CodeEngine && code != sandboxes.CodeStartupFailed && code != sandboxes.CodeNotReady {
				t.Errorf("a create of the burst failed untyped: %v (code %q)", r.err, code)
			}
		}
	}
	t.Logf("burst of %d: %d failed with the engine, %d recorded; all answered within %s of the kill", burst, failed, len(ids), time.Since(killed).Round(time.Millisecond))

	pe.Start()
	// Every recorded sandbox, and the one that ran before, comes back on its next use (retrying the typed
	// answers of a rebuild), without a restart of the Manager.
	for _, id := range append(ids, before.ID) {
		for {
			rctx, rcancel := context.WithTimeout(ctx, time.Minute)
			_, err := h.mgr.EnsureRunning(rctx, id)
			rcancel()
			if err == nil {
				break
			}
			if code := sandboxes.ErrorCode(err); code != sandboxes.CodeNotReady && code != sandboxes.CodeEngine {
				t.Fatalf("sandbox %s after the engine came back: %v", id, err)
			}
			if strings.Contains(err.Error(), "is already in use") {
				// The engine made the container of a create whose answer the kill cut off; the record never
				// learnt it. The driver must replace it, not fail on its name until the orphan sweep.
				t.Fatalf("sandbox %s after the engine came back: %v", id, err)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("sandbox %s did not come back: %v", id, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	tg = h.ready(before.ID)
	res, err := agentapi.NewClientFor(tg.Addr, tg.Token, h.mgr.AgentHTTPClient()).Exec(ctx, agentapi.ExecRequest{Cmd: "cat kept.txt"})
	if err != nil || strings.TrimSpace(res.Stdout) != "kept" {
		t.Fatalf("the file of the sandbox that ran before the kill: %+v %v", res, err)
	}
	after := h.create("p")
	h.ready(after.ID)
	events, stop := h.mgr.Subscribe(64)
	defer stop()
	if err := cli.ContainerKill(ctx, h.containerName(after.ID), "KILL"); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(events, time.Minute, func(ev sandboxes.Event) bool {
		return ev.SandboxID == after.ID && ev.Type == sandboxes.EventDied
	})

	// No leak: deleting every sandbox leaves no container or volume of the namespace on the engine.
	for _, id := range append(ids, before.ID, after.ID) {
		if err := h.mgr.Delete(ctx, id); err != nil {
			t.Fatalf("deleting %s: %v", id, err)
		}
	}
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 || len(vols.Volumes) != 0 {
		for _, c := range list {
			t.Logf("left: container %s %v", c.Names, c.Labels)
		}
		for _, v := range vols.Volumes {
			t.Logf("left: volume %s %v", v.Name, v.Labels)
		}
		// The orphan sweep removes what no record names (a create whose record never got its container).
		rep := h.mgr.SweepOrphans(ctx)
		t.Logf("after deleting every sandbox: %d containers, %d volumes left; a sweep removed %d/%d", len(list), len(vols.Volumes), rep.OrphanContainers, rep.OrphanVolumes)
		t.Errorf("deleting every sandbox left %d containers and %d volumes on the engine", len(list), len(vols.Volumes))
	}
}
