package docker_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// engineOutage is how long TestEngineSocketGone keeps the engine's socket away: SANDGATE_ENGINE_OUTAGE (a Go
// duration) when set, else the 60 s, or 5 s under -short. The behaviour under test does not depend on the
// length: nothing in the Manager or the driver keys on it (a call fails at once on the missing socket, the event
// stream resubscribes every second), so the short run shows the same thing sooner.
func engineOutage(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("SANDGATE_ENGINE_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SANDGATE_ENGINE_OUTAGE=%q: want a positive Go duration", v)
		}
		return d
	}
	if testing.Short() {
		return 5 * time.Second
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
