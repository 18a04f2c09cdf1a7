package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// testCrashReason: a container killed from outside is reported dead with the reason the engine gives (sigkill, or
// a non-zero exit), its next use rebuilds it on the same workspace; a process that outgrows the memory limit is
// reported as oom where the engine can tell (Env.ChildOOMReported).
func testCrashReason(t *testing.T, env Env) {
	p := baseProfile("small", env.Image)
	p.Resources.Memory = "128m"
	g := newGateway(t, env, sandboxes.Config{Profiles: []sandboxes.Profile{p}})
	events, unsubscribe := g.mgr.Subscribe(256)
	defer unsubscribe()
	killed := g.create(sandboxes.CreateRequest{Profile: "small"})
	oom := g.create(sandboxes.CreateRequest{Profile: "small"})
	killedTarget := g.ready(killed.ID)
	oomTarget := g.ready(oom.ID)
	g.output(killedTarget, "echo kept > /workspace/file.txt")

	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	if err := env.Kill(ctx, g.ns, g.runningContainer(killed.ID).ID); err != nil {
		t.Fatalf("killing the container of %s: %v", killed.ID, err)
	}
	ev := g.waitEvent(events, "the killed sandbox's death", func(e sandboxes.Event) bool {
		return e.SandboxID == killed.ID && e.Type == sandboxes.EventDied
	})
	if ev.Death == nil || !killReason(ev.Death) || ev.Reason != ev.Death.Reason {
		t.Fatalf("a kill reported as %+v (death %+v)", ev, ev.Death)
	}
	got := g.get(killed.ID)
	if got.Status != sandboxes.StatusIdle || got.Died == nil || got.Died.Reason != ev.Reason || !strings.Contains(got.LastError, ev.Reason) {
		t.Fatalf("after the kill: %+v (died %+v)", got, got.Died)
	}
	// The next use starts the rebuild and says why the sandbox is not ready yet.
	_, err := g.mgr.EnsureRunning(ctx, killed.ID)
	var se *sandboxes.Error
	if !errors.As(err, &se) || se.Code != sandboxes.CodeNotReady || se.Details["reason"] != ev.Reason || se.Hint != sandboxes.HintRecovering {
		t.Fatalf("the next use after the kill: %#v", err)
	}
	g.waitEvent(events, "the killed sandbox's rebuild", func(e sandboxes.Event) bool {
		return e.SandboxID == killed.ID && e.Type == sandboxes.EventReady && e.Reason == "recovered"
	})
	if got := g.output(g.ready(killed.ID), "cat /workspace/file.txt"); got != "kept" {
		t.Fatalf("workspace after the rebuild: %q", got)
	}

	// An allocation beyond the memory limit: the kernel OOM-kills it inside the sandbox. The exec's own answer
	// does not matter (the process, or the whole container, is gone); what the Manager reports does.
	res, err := g.agent.Exec(ctx, oomTarget, execRequest("python3 -c 'b = bytearray(512*1024*1024); print(len(b))'"))
	if !env.ChildOOMReported {
		// Only the allocating process is gone (SIGKILL, as the shell reports it); the sandbox serves on.
		if err != nil || res.ExitCode != 137 {
			t.Fatalf("an allocation past the memory limit: exec %+v %v (want the process killed, exit 137)", res, err)
		}
		if got := g.output(g.ready(oom.ID), "echo alive"); got != "alive" {
			t.Fatalf("the sandbox after its process's OOM kill answered %q", got)
		}
		t.Log("the engine does not report an OOM kill of a process other than the container's main one; checked the sandbox survives it")
		return
	}
	ev = g.waitEvent(events, "the OOM kill", func(e sandboxes.Event) bool {
		return e.SandboxID == oom.ID && (e.Type == sandboxes.EventOOM || e.Type == sandboxes.EventDied)
	})
	if ev.Reason != "oom" {
		t.Fatalf("an OOM kill reported as %+v (exec %+v %v)", ev, res, err)
	}
	if ev.Type == sandboxes.EventDied {
		if got := g.get(oom.ID); got.Died == nil || got.Died.Reason != "oom" || !strings.Contains(got.LastError, "oom") {
			t.Fatalf("after the OOM death: %+v", got)
		}
	}
}

// killReason says whether a death is what a kill from outside may be reported as: SIGKILL, or a non-zero exit
// where the engine reports the kill as one.
func killReason(d *sandboxes.Death) bool {
	switch d.Reason {
	case "sigkill":
		return d.ExitCode == 137
	case "exit":
		return d.ExitCode != 0
	}
	return false
}
