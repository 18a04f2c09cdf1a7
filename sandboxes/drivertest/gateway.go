package drivertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// gateway is what one gateway process holds for the suite: a Manager on a driver and a store file, and the agent
// client the API uses (sandboxes/service), sharing the Manager's connection pool.
type gateway struct {
	t     *testing.T
	env   Env
	ns    string
	store string
	cfg   sandboxes.Config
	mgr   *sandboxes.Manager
	drv   sandboxes.Driver
	agent *service.AgentClient
}

// baseProfile is the small profile every subtest starts from.
func baseProfile(id, image string) sandboxes.Profile {
	return sandboxes.Profile{ID: id, Image: image,
		Resources:    sandboxes.Resources{CPUs: 0.5, Memory: "256m", Disk: "64m", Pids: 128},
		Capabilities: []string{sandboxes.CapShell, sandboxes.CapPython, sandboxes.CapFilesystem}}
}

// newGateway starts a gateway in a namespace of its own, on a new store.
func newGateway(t *testing.T, env Env, cfg sandboxes.Config) *gateway {
	t.Helper()
	g := &gateway{t: t, env: env, ns: env.Namespace(t), store: filepath.Join(t.TempDir(), "store.db"), cfg: cfg}
	g.start()
	return g
}

// start makes a Manager (a new driver, the same store) and starts it, as a gateway's start does. The Manager is
// closed when the test ends unless something closed it before.
func (g *gateway) start() {
	g.t.Helper()
	g.drv = g.env.Driver(g.t, g.ns)
	logger := slog.New(slog.NewTextHandler(testWriter{g.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: g.ns}, g.drv, sandboxes.NewBoltStore(g.store), logger)
	if err != nil {
		g.t.Fatalf("new manager: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	cfg := g.cfg
	if g.env.Runtime != "" {
		cfg.Profiles = slices.Clone(cfg.Profiles)
		for i := range cfg.Profiles {
			if cfg.Profiles[i].Runtime == "" {
				cfg.Profiles[i].Runtime = g.env.Runtime
			}
		}
	}
	if err := mgr.Apply(ctx, cfg); err != nil {
		g.t.Fatalf("apply: %v", err)
	}
	if err := mgr.Start(ctx); err != nil {
		g.t.Fatalf("start: %v", err)
	}
	g.t.Cleanup(func() { mgr.Close() })
	g.mgr = mgr
	g.agent = service.NewAgentClient(mgr.AgentHTTPClient())
}

// testWriter sends the Manager's warnings to the test's log. Managers are closed by a cleanup of the same test, so
// nothing logs after the test ended.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (g *gateway) create(req sandboxes.CreateRequest) *sandboxes.Sandbox {
	g.t.Helper()
	if req.Owner == "" {
		req.Owner = "tester"
	}
	sb, err := g.mgr.Create(context.Background(), req)
	if err != nil {
		g.t.Fatalf("create %+v: %v", req, err)
	}
	return sb
}

func (g *gateway) get(id string) *sandboxes.Sandbox {
	g.t.Helper()
	sb, err := g.mgr.Get(context.Background(), id)
	if err != nil {
		g.t.Fatalf("get %s: %v", id, err)
	}
	return sb
}

// ready waits for the sandbox's agent through EnsureRunning, which starts it if it is stopped. A sandbox being
// rebuilt after a crash answers not-ready at once; that is asked again until the rebuild is done.
func (g *gateway) ready(id string) sandboxes.Target {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	for {
		tg, err := g.mgr.EnsureRunning(ctx, id)
		if err == nil {
			return tg
		}
		if sandboxes.ErrorCode(err) != sandboxes.CodeNotReady || ctx.Err() != nil {
			g.t.Fatalf("ensure running %s: %v", id, err)
		}
		select {
		case <-ctx.Done():
			g.t.Fatalf("%s never became ready: %v", id, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exec runs a shell command in the sandbox through its agent, as the API's exec does.
func (g *gateway) exec(tg sandboxes.Target, command string) service.ExecResult {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	res, err := g.agent.Exec(ctx, tg, execRequest(command))
	if err != nil {
		g.t.Fatalf("exec %q in %s: %v", command, tg.SandboxID, err)
	}
	return res
}

// execRequest runs command with a bound well inside testenv.WaitLimit: a hung command fails the test with its
// partial output rather than as a timeout of the whole wait.
func execRequest(command string) service.ExecRequest {
	return service.ExecRequest{Command: command, Timeout: 2 * time.Minute}
}

// output runs a command that must succeed and returns its stdout without surrounding space.
func (g *gateway) output(tg sandboxes.Target, command string) string {
	g.t.Helper()
	res := g.exec(tg, command)
	if res.ExitCode != 0 {
		g.t.Fatalf("%q in %s: exit %d, stdout %q, stderr %q", command, tg.SandboxID, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

// The Manager's label keys are "<namespace>.<key>" (sandboxes/names.go); drivers keep them as the identity of what
// they make, so the suite finds a sandbox's container and a workspace's volume by them.
func (g *gateway) label(key string) string { return g.ns + "." + key }

// containers is what the driver lists of sandbox id.
func (g *gateway) containers(id string) []sandboxes.ContainerState {
	g.t.Helper()
	list, err := g.drv.List(context.Background(), map[string]string{g.label("id"): id})
	if err != nil {
		g.t.Fatalf("listing the containers of %s: %v", id, err)
	}
	return list
}

// runningContainer is the one running container of sandbox id.
func (g *gateway) runningContainer(id string) sandboxes.ContainerState {
	g.t.Helper()
	var running []sandboxes.ContainerState
	for _, c := range g.containers(id) {
		if c.Running {
			running = append(running, c)
		}
	}
	if len(running) != 1 {
		g.t.Fatalf("%s has %d running containers, want 1: %+v", id, len(running), g.containers(id))
	}
	return running[0]
}

// volumes is what the driver lists of workspace ws.
func (g *gateway) volumes(ws string) []sandboxes.VolumeInfo {
	g.t.Helper()
	list, err := g.drv.ListVolumes(context.Background(), map[string]string{g.label("workspace"): ws})
	if err != nil {
		g.t.Fatalf("listing the volumes of %s: %v", ws, err)
	}
	return list
}

// waitFor polls cond until it holds; what it reports on the last try says why it does not.
func (g *gateway) waitFor(what string, cond func() (bool, string)) {
	g.t.Helper()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: not within %s (%s)", what, testenv.WaitLimit, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitEvent returns the first event on ch that match accepts.
func (g *gateway) waitEvent(ch <-chan sandboxes.Event, what string, match func(sandboxes.Event) bool) sandboxes.Event {
	g.t.Helper()
	deadline := time.After(testenv.WaitLimit)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				g.t.Fatalf("%s: the event stream ended", what)
			}
			if match(ev) {
				return ev
			}
		case <-deadline:
			g.t.Fatalf("%s: no event within %s", what, testenv.WaitLimit)
		}
	}
}

// gone reports whether the Manager no longer knows sandbox id.
func (g *gateway) gone(id string) (bool, string) {
	sb, err := g.mgr.Get(context.Background(), id)
	if sandboxes.ErrorCode(err) == sandboxes.CodeNotFound {
		return true, ""
	}
	return false, fmt.Sprintf("get: %+v %v", sb, err)
}

// leftovers is everything the engine (through Env.Leftovers) and the driver (through its own listing) still hold
// of the namespace.
func (g *gateway) leftovers() []string {
	g.t.Helper()
	ctx := context.Background()
	left, err := g.env.Leftovers(ctx, g.ns)
	if err != nil {
		g.t.Fatalf("listing what the engine holds of %s: %v", g.ns, err)
	}
	managed := map[string]string{g.label("managed"): "true"}
	cs, err := g.drv.List(ctx, managed)
	if err == nil {
		for _, c := range cs {
			left = append(left, "driver container "+c.Name)
		}
		var vs []sandboxes.VolumeInfo
		vs, err = g.drv.ListVolumes(ctx, managed)
		for _, v := range vs {
			left = append(left, "driver volume "+v.Name)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		g.t.Fatalf("the driver's listing of %s: %v", g.ns, err)
	}
	return left
}
