package sandboxes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

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
		return nextEventOf(t, events, sb.ID, typ, 5*time.Second)
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

// A container that exits before Start returns is a death the launch sees first: it is recorded with its exit code
// (no die event needed), the container is kept for its log, and the next call rebuilds it in place.
func TestExitAtStartIsRecordedByTheLaunch(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	d.exitAtStart = &ExitedError{ExitCode: 7, At: time.Now()}
	events, stop := m.Subscribe(64)
	defer stop()
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEventOf(t, events, sb.ID, EventDied, 10*time.Second); ev.Death == nil || ev.Death.ExitCode != 7 || ev.Reason != "exit" {
		t.Fatalf("died event %+v", ev)
	}
	containerID := func() string {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.entries[sb.ID].rec.ContainerID
	}
	cid := containerID()
	d.mu.Lock()
	kept := d.containers[cid] != nil
	d.mu.Unlock()
	if !kept {
		t.Fatalf("the dead container %q was removed; its log is the evidence of why", cid)
	}
	// Calls after the death answer a retryable session_not_ready while the failed launch winds down and the rebuild
	// runs; then the same sandbox is ready again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := m.EnsureRunning(ctx, sb.ID)
		if err == nil {
			break
		}
		if ErrorCode(err) != CodeNotReady {
			t.Fatalf("a call after the death: %v, want a retryable session_not_ready", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not rebuilt: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if again := containerID(); again != cid {
		t.Fatalf("the recovery made a new container %s, want the kept %s started again", again, cid)
	}
}

// nextEventOf is the next event of type typ for sandbox id, skipping others; none within limit fails the test.
func nextEventOf(t *testing.T, events <-chan Event, id, typ string, limit time.Duration) Event {
	t.Helper()
	for {
		select {
		case ev := <-events:
			if ev.Type == typ && ev.SandboxID == id {
				return ev
			}
		case <-time.After(limit):
			t.Fatalf("no %s event for %s", typ, id)
		}
	}
}

// TestCheckAgentLossRecordsADeathBeforeItsEvent: an agent call failed in transport and the engine's die event has
// not arrived (a busy host). CheckAgentLoss on a running container changes nothing; on an exited one it records the
// death and starts the rebuild at once, answering the typed, retryable session_not_ready naming the death; the late
// event then changes nothing, and the sandbox comes back ready on the same workspace.
func TestCheckAgentLossRecordsADeathBeforeItsEvent(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a"})
	mustReady(t, m, sb.ID)
	if err := m.CheckAgentLoss(ctx, sb.ID); err != nil {
		t.Fatalf("a running container: %v", err)
	}
	m.mu.RLock()
	cid := m.entries[sb.ID].rec.ContainerID
	m.mu.RUnlock()
	d.mu.Lock()
	c := d.containers[cid]
	c.state.Running, c.state.ExitCode, c.state.FinishedAt = false, 137, time.Now() // the agent was SIGKILLed; no event yet
	labels := c.state.Labels
	d.mu.Unlock()

	err := m.CheckAgentLoss(ctx, sb.ID)
	var se *Error
	if !errors.As(err, &se) || se.Code != CodeNotReady || se.Details["reason"] != "sigkill" || se.Details["recovering"] != true {
		t.Fatalf("an exited container: %#v", err)
	}
	d.events <- ContainerEvent{ContainerID: cid, Action: "die", Labels: labels, ExitCode: 137, At: time.Now()}
	waitFor(t, func() bool { g, _ := m.Get(ctx, sb.ID); return g != nil && g.Status == StatusReady })
	got, _ := m.Get(ctx, sb.ID)
	if got.WorkspaceID != sb.WorkspaceID || !strings.Contains(got.LastError, "sigkill") {
		t.Fatalf("after the rebuild: %+v", got)
	}
	if err := m.CheckAgentLoss(ctx, sb.ID); err != nil {
		t.Fatalf("the rebuilt container: %v", err)
	}
}
