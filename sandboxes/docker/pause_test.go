package docker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

func (h *harness) agent(tg sandboxes.Target) *agentapi.Client {
	base, hc := agentapi.BaseURL(tg.Addr, nil)
	return agentapi.NewClient(base, tg.Token, hc)
}

// readyWithPython creates a sandbox of profile small, waits for it to be ready, and runs code on its Python
// kernel: state that a test later finds kept, or lost.
func (h *harness) readyWithPython(ctx context.Context, code string) *sandboxes.Sandbox {
	h.t.Helper()
	sb := h.create("small")
	if res, err := h.agent(h.ready(sb.ID)).PythonExec(ctx, agentapi.KernelExecRequest{Code: code}); err != nil || !res.Success {
		h.t.Fatalf("python: %+v %v", res, err)
	}
	return sb
}

// cpuUsage is the container's cumulative CPU time (cgroup cpuacct) as the engine reports it.
func (h *harness) cpuUsage(id string) uint64 {
	h.t.Helper()
	resp, err := h.cli.ContainerStatsOneShot(context.Background(), h.containerName(id))
	if err != nil {
		h.t.Fatalf("stats: %v", err)
	}
	defer resp.Body.Close()
	var st struct {
		CPUStats struct {
			CPUUsage struct {
				TotalUsage uint64 `json:"total_usage"`
			} `json:"cpu_usage"`
		} `json:"cpu_stats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		h.t.Fatalf("decoding stats: %v", err)
	}
	return st.CPUStats.CPUUsage.TotalUsage
}

// assertFrozen checks a paused sandbox's container the three ways it can be seen: the kernel's freezer says
// frozen; the driver reports it paused (and List not running), which is what reconcile acts on; and Docker, which
// did not freeze it, still calls it running, refuses `docker exec` into it with runc's clear error instead of
// hanging. A gVisor sandbox is paused through the engine (freezableRuntime): Docker calls it paused.
func (h *harness) assertFrozen(id string) {
	h.t.Helper()
	name := h.containerName(id)
	info := h.inspect(id)
	gvisor := info.HostConfig.Runtime == sandboxes.RuntimeGVisor
	if !gvisor && !testenv.Frozen(h.t, name) {
		h.t.Fatalf("the freezer of %s is not frozen", name)
	}
	drv, err := docker.New("")
	if err != nil {
		h.t.Fatal(err)
	}
	defer drv.Close()
	ctx := context.Background()
	st, err := drv.Inspect(ctx, info.ID)
	if err != nil || !st.Paused || !st.Running {
		h.t.Fatalf("driver's inspect of a frozen container: %+v %v", st, err)
	}
	list, err := drv.List(ctx, map[string]string{h.ns + ".id": id})
	if err != nil || len(list) != 1 || !list[0].Paused || list[0].Running {
		h.t.Fatalf("driver's list of a frozen container: %+v %v", list, err)
	}
	if gvisor {
		if !info.State.Running || !info.State.Paused {
			h.t.Fatalf("Docker's view of a gVisor sandbox paused through the engine: %+v", info.State)
		}
		return
	}
	if !info.State.Running || info.State.Paused {
		h.t.Fatalf("Docker's view of a container frozen through its cgroup: %+v", info.State)
	}
	if out, err := h.exec(id, "true"); err == nil || !strings.Contains(out, "paused") {
		h.t.Fatalf("docker exec into a frozen container: %v %s", err, out)
	}
}

func readPTYUntil(ctx context.Context, c *websocket.Conn, marker string) error {
	var seen bytes.Buffer
	for {
		typ, p, err := c.Read(ctx)
		if err != nil {
			return fmt.Errorf("reading (seen %q): %w", seen.String(), err)
		}
		if typ == websocket.MessageBinary && len(p) > 0 && (p[0] == agentapi.PTYChannelStdout || p[0] == agentapi.PTYChannelReplay) {
			seen.Write(p[1:])
			if strings.Contains(seen.String(), marker+"\r\n") {
				return nil
			}
		}
	}
}

// TestPauseFreezesResumeKeepsState: a paused sandbox burns no CPU (its cpuacct counter stays put over an
// interval while a busy loop runs inside), reports paused, and is not resolvable; resume keeps the Python
// kernel's variables and a PTY WebSocket opened before the pause; a request to a paused sandbox (EnsureRunning,
// which every exec, file and ticket call goes through) resumes it inside the call.
func TestPauseFreezesResumeKeepsState(t *testing.T) {
	eachRuntime(t, pauseFreezesResumeKeepsState)
}

func pauseFreezesResumeKeepsState(t *testing.T, runtime string) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{runtimeProfile("small", runtime)}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := h.create("small")
	tg := h.ready(sb.ID)
	ag := h.agent(tg)
	if res, err := ag.PythonExec(ctx, agentapi.KernelExecRequest{Code: "kept = 6 * 7"}); err != nil || !res.Success {
		t.Fatalf("python: %+v %v", res, err)
	}
	if _, err := ag.Exec(ctx, agentapi.ExecRequest{Cmd: "while :; do :; done", YieldMS: 50, TimeoutMS: 600_000}); err != nil {
		t.Fatalf("busy loop: %v", err)
	}
	pty, err := ag.CreatePTY(ctx, agentapi.PTYCreateRequest{Cmd: "sh"})
	if err != nil {
		t.Fatalf("pty: %v", err)
	}
	wsURL := ag.PTYWebSocketURL(pty.ID, 0, false)
	hdr := map[string][]string{agentapi.TokenHeader: {tg.Token}}
	ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dialing the pty: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, append([]byte{agentapi.PTYChannelStdin}, "echo before-$((1+1))\n"...)); err != nil {
		t.Fatal(err)
	}
	if err := readPTYUntil(ctx, ws, "before-2"); err != nil {
		t.Fatal(err)
	}
	// The busy loop moves the counter before the pause (waited for, not timed).
	first := h.cpuUsage(sb.ID)
	for h.cpuUsage(sb.ID) == first {
		if ctx.Err() != nil {
			t.Fatal("the busy loop never used CPU")
		}
	}

	events, unsub := h.mgr.Subscribe(64)
	defer unsub()
	got, err := h.mgr.Pause(ctx, sb.ID)
	if err != nil || got.Status != sandboxes.StatusPaused {
		t.Fatalf("pause: %+v %v", got, err)
	}
	h.assertFrozen(sb.ID)
	if _, ok := h.mgr.Resolve(sb.ID); ok {
		t.Fatal("a paused sandbox resolves to a target (requests would hang on frozen processes)")
	}
	if again, err := h.mgr.Pause(ctx, sb.ID); err != nil || again.Status != sandboxes.StatusPaused {
		t.Fatalf("pausing a paused sandbox: %+v %v", again, err)
	}
	before := h.cpuUsage(sb.ID)
	time.Sleep(time.Second) // the observation interval: the counter must not move during it
	after := h.cpuUsage(sb.ID)
	switch {
	case runtime == "" && after != before:
		t.Fatalf("CPU counter moved while paused: %d -> %d ns", before, after)
	case runtime != "" && after-before > uint64(100*time.Millisecond):
		// gVisor stops the sandbox's tasks (the busy loop), but its own kernel keeps a few timers running.
		t.Fatalf("a paused gVisor sandbox used %s of CPU in a second", time.Duration(after-before))
	case runtime != "":
		t.Logf("a paused gVisor sandbox's own kernel used %s of CPU in a second", time.Duration(after-before))
	}
	h.waitEvent(events, 10*time.Second, func(ev sandboxes.Event) bool { return ev.Type == sandboxes.EventPaused && ev.SandboxID == sb.ID })

	res, err := h.mgr.Resume(ctx, sb.ID)
	if err != nil || res.Status != sandboxes.StatusReady {
		t.Fatalf("resume: %+v %v", res, err)
	}
	h.waitEvent(events, 10*time.Second, func(ev sandboxes.Event) bool { return ev.Type == sandboxes.EventResumed && ev.SandboxID == sb.ID })
	out, err := ag.PythonExec(ctx, agentapi.KernelExecRequest{Code: "kept"})
	if err != nil || out.Result == nil || *out.Result != "42" {
		t.Fatalf("the kernel lost its variable across pause: %+v %v", out, err)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, append([]byte{agentapi.PTYChannelStdin}, "echo after-$((2+2))\n"...)); err != nil {
		t.Fatal(err)
	}
	if err := readPTYUntil(ctx, ws, "after-4"); err != nil {
		t.Fatalf("the terminal opened before the pause: %v", err)
	}
	// The CPU counter moves again (the busy loop was thawed with everything else).
	thawed := h.cpuUsage(sb.ID)
	for h.cpuUsage(sb.ID) == thawed {
		if ctx.Err() != nil {
			t.Fatal("the busy loop did not resume")
		}
	}

	// A request to a paused sandbox resumes it inside the call.
	if _, err := h.mgr.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	tg2, err := h.mgr.EnsureRunning(ctx, sb.ID)
	if err != nil || tg2 != tg {
		t.Fatalf("ensure running a paused sandbox: %+v %v", tg2, err)
	}
	if r, err := ag.Exec(ctx, agentapi.ExecRequest{Cmd: "echo resumed"}); err != nil || strings.TrimSpace(r.Stdout) != "resumed" {
		t.Fatalf("exec after the in-call resume: %+v %v", r, err)
	}

	// Pausing a stopped sandbox is a typed invalid_state; stopping a paused one works.
	if _, err := h.mgr.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.mgr.Stop(ctx, sb.ID); err != nil {
		t.Fatalf("stopping a paused sandbox: %v", err)
	}
	if _, err := h.mgr.Pause(ctx, sb.ID); sandboxes.ErrorCode(err) != sandboxes.CodeInvalidState {
		t.Fatalf("pausing a stopped sandbox: %v", err)
	}
}

// TestIdleActionPause: with idle_action pause an idle sandbox is paused (not stopped), a request resumes it with
// its processes, and one that stays paused past pause_timeout is stopped.
func TestIdleActionPause(t *testing.T) {
	p := smallProfile("napper", "")
	p.IdleTimeout = sandboxes.Duration(time.Second)
	p.IdleAction = sandboxes.IdleActionPause
	p.PauseTimeout = sandboxes.Duration(3 * time.Second)
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	events, unsub := h.mgr.Subscribe(256)
	defer unsub()
	sb := h.create("napper")
	tg := h.ready(sb.ID)
	ag := h.agent(tg)
	if res, err := ag.PythonExec(ctx, agentapi.KernelExecRequest{Code: "nap = 'kept'"}); err != nil || !res.Success {
		t.Fatalf("python: %+v %v", res, err)
	}
	h.waitEvent(events, time.Minute, func(ev sandboxes.Event) bool {
		return ev.Type == sandboxes.EventPaused && ev.SandboxID == sb.ID && ev.Reason == "idle"
	})
	if got, _ := h.mgr.Get(ctx, sb.ID); got.Status != sandboxes.StatusPaused || got.IdleExpiresAt == nil {
		t.Fatalf("after idle: %+v", got)
	}
	if _, err := h.mgr.EnsureRunning(ctx, sb.ID); err != nil {
		t.Fatalf("resuming by request: %v", err)
	}
	out, err := ag.PythonExec(ctx, agentapi.KernelExecRequest{Code: "nap"})
	if err != nil || out.Result == nil || *out.Result != "'kept'" {
		t.Fatalf("variable after idle pause: %+v %v", out, err)
	}
	// Left alone: paused again, then stopped at the second deadline.
	h.waitEvent(events, time.Minute, func(ev sandboxes.Event) bool {
		return ev.Type == sandboxes.EventStopped && ev.SandboxID == sb.ID && ev.Reason == "paused too long"
	})
	if got, _ := h.mgr.Get(ctx, sb.ID); got.Status != sandboxes.StatusIdle {
		t.Fatalf("after the pause deadline: %+v", got)
	}
	if info := h.inspect(sb.ID); info.State.Running || info.State.Paused {
		t.Fatalf("container after the pause deadline: %+v", info.State)
	}
}

// TestPausedSurvivesManagerRestart: a new Manager on the same store (what a kill -9 and restart of the gateway
// gives) finds the sandbox paused, leaves it paused, and resumes it on request.
func TestPausedSurvivesManagerRestart(t *testing.T) {
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}}
	h := newHarness(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := h.readyWithPython(ctx, "survivor = 7")
	if _, err := h.mgr.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	h.mgr.Close()
	h.start(cfg)
	got, err := h.mgr.Get(ctx, sb.ID)
	if err != nil || got.Status != sandboxes.StatusPaused {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	if !testenv.Frozen(t, h.containerName(sb.ID)) {
		t.Fatal("the restart thawed the container")
	}
	tg2, err := h.mgr.EnsureRunning(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.agent(tg2).PythonExec(ctx, agentapi.KernelExecRequest{Code: "survivor * 6"})
	if err != nil || out.Result == nil || *out.Result != "42" {
		t.Fatalf("kernel after restart and resume: %+v %v", out, err)
	}
}

// TestPausedSandboxExpires: the TTL keeps running while a sandbox is paused, and its expiry removes the frozen
// container and its workspace (the driver thaws it for the engine, which does not know it is frozen).
func TestPausedSandboxExpires(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}, GCInterval: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	events, unsub := h.mgr.Subscribe(256)
	defer unsub()
	sb, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h.ready(sb.ID)
	if _, err := h.mgr.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	h.assertFrozen(sb.ID)
	got, _ := h.mgr.Get(ctx, sb.ID)
	h.waitEvent(events, 2*time.Minute, func(ev sandboxes.Event) bool {
		return ev.Type == sandboxes.EventDeleted && ev.SandboxID == sb.ID
	})
	if h.containerExists(sb.ID) {
		t.Fatal("the expired paused sandbox's container is still there")
	}
	if h.volumeExists(h.mgr.VolumeName(got.WorkspaceID)) {
		t.Fatal("the expired paused sandbox's workspace is still there")
	}
}

// TestFrozenWithoutRecordedPauseIsThawedAtStart: a container left frozen while its record says running (a gateway
// killed during a snapshot's copy, which freezes without recording a pause) is thawed and adopted by the next
// Manager, not mistaken for a stopped one (whose start would then wait on a frozen agent).
func TestFrozenWithoutRecordedPauseIsThawedAtStart(t *testing.T) {
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}}
	h := newHarness(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := h.readyWithPython(ctx, "kept = 'through the crash'")
	drv, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	cid := h.inspect(sb.ID).ID
	h.mgr.Close()
	if err := drv.Pause(ctx, cid); err != nil { // what a capture does, with nothing recorded
		t.Fatal(err)
	}
	if !testenv.Frozen(t, h.containerName(sb.ID)) {
		t.Fatal("not frozen")
	}
	h.start(cfg)
	tg2 := h.ready(sb.ID)
	if testenv.Frozen(t, h.containerName(sb.ID)) {
		t.Fatal("the new Manager left the container frozen")
	}
	out, err := h.agent(tg2).PythonExec(ctx, agentapi.KernelExecRequest{Code: "kept"})
	if err != nil || out.Result == nil || *out.Result != "'through the crash'" {
		t.Fatalf("kernel after the thaw: %+v %v", out, err)
	}
}

// TestEnginePausedSandboxResumesThroughEngine: a container the engine paused (an operator's `docker pause`) is
// unpaused through the engine, so Docker's paused flag is not left set on a running container.
func TestEnginePausedSandboxResumesThroughEngine(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := h.create("small")
	h.ready(sb.ID)
	if out, err := execCommand("docker", "pause", h.containerName(sb.ID)); err != nil {
		t.Fatalf("docker pause: %v %s", err, out)
	}
	if got, err := h.mgr.Pause(ctx, sb.ID); err != nil || got.Status != sandboxes.StatusPaused {
		t.Fatalf("pausing an engine-paused sandbox: %+v %v", got, err)
	}
	if got, err := h.mgr.Resume(ctx, sb.ID); err != nil || got.Status != sandboxes.StatusReady {
		t.Fatalf("resume: %+v %v", got, err)
	}
	// Docker's flag can lag its unpause by an event (pause.go): wait for it, then the kernel must agree.
	deadline := time.Now().Add(testenv.WaitLimit)
	for h.inspect(sb.ID).State.Paused {
		if time.Now().After(deadline) {
			t.Fatal("Docker still reports the resumed container paused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if testenv.Frozen(t, h.containerName(sb.ID)) {
		t.Fatal("the resumed container is still frozen")
	}
	if out, err := h.exec(sb.ID, "echo", "thawed"); err != nil || strings.TrimSpace(out) != "thawed" {
		t.Fatalf("docker exec after resume: %v %s", err, out)
	}
}
