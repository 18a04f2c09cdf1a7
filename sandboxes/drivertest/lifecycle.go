package drivertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// testCreateReady: a create answers at once, the sandbox becomes ready by itself, its agent answers at the target
// the Manager resolves (to its own token only), the engine holds one running container and one workspace volume
// carrying the sandbox's identity, and a delete removes both.
func testCreateReady(t *testing.T, env Env) {
	g := newGateway(t, env, sandboxes.Config{Profiles: []sandboxes.Profile{baseProfile("small", env.Image)}})
	ctx := context.Background()
	sb := g.create(sandboxes.CreateRequest{Profile: "small"})
	if !strings.HasPrefix(sb.ID, "sandbox-") || (sb.Status != sandboxes.StatusStarting && sb.Status != sandboxes.StatusReady) ||
		sb.LaunchType != sandboxes.LaunchCold || sb.WorkspaceID == "" {
		t.Fatalf("create returned %+v", sb)
	}
	tg := g.ready(sb.ID)
	if got := g.get(sb.ID); got.Status != sandboxes.StatusReady || got.Died != nil || got.LastError != "" {
		t.Fatalf("get after ready: %+v", got)
	}
	if rt, ok := g.mgr.Resolve(sb.ID); !ok || rt != tg {
		t.Fatalf("Resolve = %+v %v, want %+v", rt, ok, tg)
	}
	agent := agentapi.NewClientFor(tg.Addr, tg.Token, g.mgr.AgentHTTPClient())
	if _, err := agent.Health(ctx); err != nil {
		t.Fatalf("agent health at %s: %v", tg.Addr, err)
	}
	// Each sandbox has its own token, and its agent takes no other: a tenant who learns another sandbox's address
	// cannot run anything there with the token of their own.
	other := g.create(sandboxes.CreateRequest{Profile: "small", Owner: "other"})
	otherTarget := g.ready(other.ID)
	if otherTarget.Token == tg.Token || len(tg.Token) < 32 {
		t.Fatalf("tokens %q and %q: want two distinct long ones", tg.Token, otherTarget.Token)
	}
	intruder := agentapi.NewClientFor(tg.Addr, otherTarget.Token, g.mgr.AgentHTTPClient())
	if res, err := intruder.Exec(ctx, agentapi.ExecRequest{Cmd: "id"}); err == nil {
		t.Fatalf("the agent of %s ran a command for the token of %s: %+v", sb.ID, other.ID, res)
	}

	c := g.runningContainer(sb.ID)
	for key, want := range map[string]string{"id": sb.ID, "profile": "small", "owner": "tester", "instance": g.mgr.Instance(), "managed": "true"} {
		if got := c.Labels[g.label(key)]; got != want {
			t.Errorf("container label %s = %q, want %q (labels %v)", g.label(key), got, want, c.Labels)
		}
	}
	if vs := g.volumes(sb.WorkspaceID); len(vs) != 1 {
		t.Fatalf("workspace %s has %d volumes, want 1: %+v", sb.WorkspaceID, len(vs), vs)
	}

	if err := g.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := g.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("a second delete: %v", err)
	}
	if ok, state := g.gone(sb.ID); !ok {
		t.Fatalf("after delete: %s", state)
	}
	g.waitFor("the deleted sandbox's container and volume are removed", func() (bool, string) {
		cs, vs := g.containers(sb.ID), g.volumes(sb.WorkspaceID)
		return len(cs) == 0 && len(vs) == 0, fmt.Sprintf("containers %+v, volumes %+v", cs, vs)
	})
}

// testExec: commands run through the agent as the API runs them: output, exit status and environment come back,
// they run unprivileged, and the workspace is writable while the root filesystem is not.
func testExec(t *testing.T, env Env) {
	g := newGateway(t, env, sandboxes.Config{Profiles: []sandboxes.Profile{baseProfile("small", env.Image)}})
	sb := g.create(sandboxes.CreateRequest{Profile: "small"})
	tg := g.ready(sb.ID)

	res := g.exec(tg, "echo out; echo err >&2; exit 3")
	if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.TimedOut {
		t.Fatalf("exec result %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := g.agent.Exec(ctx, tg, service.ExecRequest{Command: `printf %s "$GREETING"`, Env: map[string]string{"GREETING": "hello"}})
	if err != nil || res.Stdout != "hello" {
		t.Fatalf("exec with env: %+v %v", res, err)
	}
	if uid := g.output(tg, "id -u"); uid == "0" || uid == "" {
		t.Fatalf("commands run as uid %q, want an unprivileged user", uid)
	}
	if got := g.output(tg, "echo 42 > /workspace/answer && cat /workspace/answer"); got != "42" {
		t.Fatalf("workspace write and read: %q", got)
	}
	if res := g.exec(tg, "touch /etc/sandgate-conformance"); res.ExitCode == 0 {
		t.Fatal("the root filesystem is writable")
	}
}

// testIdleStopRestart: past its idle timeout the collector stops a sandbox's compute and keeps its workspace; the
// next use starts it again with the same workspace.
func testIdleStopRestart(t *testing.T, env Env) {
	p := baseProfile("idle", env.Image)
	p.IdleTimeout = sandboxes.Duration(time.Second)
	g := newGateway(t, env, sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour})
	ctx := context.Background()
	sb := g.create(sandboxes.CreateRequest{Profile: "idle"})
	tg := g.ready(sb.ID)
	g.output(tg, "echo kept > /workspace/file.txt")
	if got := g.get(sb.ID); got.IdleExpiresAt == nil {
		t.Fatalf("a running sandbox of a profile with an idle timeout has no idle deadline: %+v", got)
	}

	stopped := 0
	g.waitFor("the collector stops the idle sandbox", func() (bool, string) {
		rep := g.mgr.CollectGarbage(ctx)
		stopped += rep.IdleStopped
		return stopped == 1, fmt.Sprintf("gc report %+v, idle deadline %v", rep, g.get(sb.ID).IdleExpiresAt)
	})
	if got := g.get(sb.ID); got.Status != sandboxes.StatusIdle || got.IdleExpiresAt != nil || got.Died != nil {
		t.Fatalf("after the idle stop: %+v", got)
	}
	for _, c := range g.containers(sb.ID) {
		if c.Running {
			t.Fatalf("a container still runs after the idle stop: %+v", c)
		}
	}
	if _, ok := g.mgr.Resolve(sb.ID); ok {
		t.Fatal("Resolve answers for a stopped sandbox")
	}
	if vs := g.volumes(sb.WorkspaceID); len(vs) != 1 {
		t.Fatalf("the idle stop did not keep the workspace: %+v", vs)
	}
	// Keepalive never starts compute.
	if err := g.mgr.Keepalive(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got := g.get(sb.ID); got.Status != sandboxes.StatusIdle {
		t.Fatalf("keepalive changed an idle sandbox to %s", got.Status)
	}

	tg = g.ready(sb.ID)
	if got := g.output(tg, "cat /workspace/file.txt"); got != "kept" {
		t.Fatalf("workspace after the restart: %q", got)
	}
	if got := g.get(sb.ID); got.Status != sandboxes.StatusReady {
		t.Fatalf("after the restart: %+v", got)
	}
	g.runningContainer(sb.ID)
	// An explicit stop is the same stop, and a second one changes nothing.
	for range 2 {
		if err := g.mgr.Stop(ctx, sb.ID); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	if got := g.get(sb.ID); got.Status != sandboxes.StatusIdle {
		t.Fatalf("after an explicit stop: %+v", got)
	}
	for _, c := range g.containers(sb.ID) {
		if c.Running {
			t.Fatalf("a container still runs after an explicit stop: %+v", c)
		}
	}
}

// testTTLExpiry: past its TTL a sandbox reads expired and cannot be started; the collector removes it with its own
// workspace and keeps a caller's workspace, whose files a later sandbox finds. Nothing races the clock: the short
// TTL sandboxes are only observed once they have expired, however long their creation took.
func testTTLExpiry(t *testing.T, env Env) {
	g := newGateway(t, env, sandboxes.Config{Profiles: []sandboxes.Profile{baseProfile("small", env.Image)}, GCInterval: time.Hour})
	ctx := context.Background()
	ws, err := g.mgr.CreateWorkspace(ctx, sandboxes.WorkspaceSpec{Owner: "tester"})
	if err != nil {
		t.Fatalf("create workspace: %v", err)
	}
	writer := g.create(sandboxes.CreateRequest{Profile: "small", WorkspaceID: ws.ID, TTL: -1})
	g.output(g.ready(writer.ID), "echo kept > /workspace/file.txt")
	if err := g.mgr.Delete(ctx, writer.ID); err != nil {
		t.Fatal(err)
	}

	own := g.create(sandboxes.CreateRequest{Profile: "small", TTL: time.Second})
	onCaller := g.create(sandboxes.CreateRequest{Profile: "small", WorkspaceID: ws.ID, TTL: time.Second})
	survivor := g.create(sandboxes.CreateRequest{Profile: "small", TTL: time.Hour})
	for _, sb := range []*sandboxes.Sandbox{own, onCaller} {
		if sb.ExpiresAt == nil {
			t.Fatalf("a sandbox with a TTL has no deadline: %+v", sb)
		}
		g.waitFor("the sandbox reads expired", func() (bool, string) {
			got := g.get(sb.ID)
			return got.Status == sandboxes.StatusExpired, fmt.Sprintf("status %s", got.Status)
		})
	}
	if _, err := g.mgr.EnsureRunning(ctx, own.ID); sandboxes.ErrorCode(err) != sandboxes.CodeExpired {
		t.Fatalf("ensure running an expired sandbox: %v", err)
	}
	if _, err := g.mgr.ExtendTTL(ctx, own.ID, time.Hour); sandboxes.ErrorCode(err) != sandboxes.CodeExpired {
		t.Fatalf("extending an expired sandbox: %v", err)
	}
	// A create returns before its container exists: on a busy engine the survivor may still wait for a start
	// slot. It is ready before the collection, so the check below is of the collector, not of a race.
	g.ready(survivor.ID)
	if rep := g.mgr.CollectGarbage(ctx); rep.Expired != 2 {
		t.Fatalf("gc report %+v, want 2 expired", rep)
	}
	for _, sb := range []*sandboxes.Sandbox{own, onCaller} {
		if ok, state := g.gone(sb.ID); !ok {
			t.Fatalf("expired sandbox still known: %s", state)
		}
		g.waitFor("the expired sandbox's container is removed", func() (bool, string) {
			cs := g.containers(sb.ID)
			return len(cs) == 0, fmt.Sprintf("containers %+v", cs)
		})
	}
	g.waitFor("the expired sandbox's own workspace is removed", func() (bool, string) {
		vs := g.volumes(own.WorkspaceID)
		return len(vs) == 0, fmt.Sprintf("volumes %+v", vs)
	})
	if vs := g.volumes(ws.ID); len(vs) != 1 {
		t.Fatalf("the caller's workspace was removed with an expired sandbox: %+v", vs)
	}
	if _, err := g.mgr.Workspace(ctx, ws.ID); err != nil {
		t.Fatalf("the caller's workspace record: %v", err)
	}
	if got := g.get(survivor.ID); got.Status != sandboxes.StatusReady {
		t.Fatalf("the collector touched a sandbox whose TTL has not passed: %+v", got)
	}
	g.runningContainer(survivor.ID)
	reader := g.create(sandboxes.CreateRequest{Profile: "small", WorkspaceID: ws.ID, TTL: -1})
	if got := g.output(g.ready(reader.ID), "cat /workspace/file.txt"); got != "kept" {
		t.Fatalf("the caller's workspace after an expiry: %q", got)
	}
}

// testNoLeaks: deleting every sandbox (ready, still starting, on a caller's workspace) and the workspace leaves
// nothing in the engine, in the Manager or in its store.
func testNoLeaks(t *testing.T, env Env) {
	g := newGateway(t, env, sandboxes.Config{Profiles: []sandboxes.Profile{baseProfile("small", env.Image)}, GCInterval: time.Hour})
	ctx := context.Background()
	ready := g.create(sandboxes.CreateRequest{Profile: "small"})
	g.ready(ready.ID)
	starting := g.create(sandboxes.CreateRequest{Profile: "small"})
	ws, err := g.mgr.CreateWorkspace(ctx, sandboxes.WorkspaceSpec{Owner: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	onWorkspace := g.create(sandboxes.CreateRequest{Profile: "small", WorkspaceID: ws.ID})
	g.ready(onWorkspace.ID)
	for _, id := range []string{starting.ID, ready.ID, onWorkspace.ID} {
		if err := g.mgr.Delete(ctx, id); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
	}
	if err := g.mgr.DeleteWorkspace(ctx, ws.ID); err != nil {
		t.Fatalf("delete workspace: %v", err)
	}

	g.waitFor("the engine holds nothing of the namespace", func() (bool, string) {
		left := g.leftovers()
		return len(left) == 0, strings.Join(left, ", ")
	})
	if list, _, err := g.mgr.List(ctx, sandboxes.ListOptions{}); err != nil || len(list) != 0 {
		t.Fatalf("the Manager still lists %d sandboxes (%v)", len(list), err)
	}
	if st := g.mgr.Stats(); len(st) != 0 {
		t.Fatalf("the Manager still holds %v", st)
	}
	if err := g.mgr.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	store := sandboxes.NewBoltStore(g.store)
	defer store.Close()
	if recs, err := store.Load(); err != nil || len(recs) != 0 {
		t.Fatalf("the store still holds %d records (%v): %+v", len(recs), err, recs)
	}
}
