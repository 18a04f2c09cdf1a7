// Package sandboxestest is the one test double of the lifecycle core for the unit tests above it (sandboxes/service
// and the dialects): NewManager is the real *sandboxes.Manager over Engine, an in-memory engine driver, and a bbolt
// store in the test's directory (or the test's own store: NewManagerIn). A test sets what the engine answers (starts
// held, an agent whose start-up fails, a container's death) and reads the real state back. Integration tests use
// the real Manager on the real engine.
package sandboxestest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// Engine is an in-memory container engine (a sandboxes.Driver) for unit tests that want the real Manager and its
// real lifecycle logic without Docker: containers and volumes are map entries, and every started container's agent
// is one test server that answers /health as ready (or, after FailStartups, as an agent whose start-up failed). Of
// the Manager's optional engine surfaces it has pause alone; usage, logs and snapshots answer as on an engine
// without them. Make one with NewEngine.
type Engine struct {
	// AgentAddr, when set before the first start, is the agent address every start answers instead of the
	// engine's own server (a test's agent, which must answer /health for the Manager's readiness probe).
	AgentAddr string

	mu         sync.Mutex
	agent      string
	startup    string // non-empty: the agent's /health says its start-up customisation failed with this (FailStartups)
	n          int
	containers map[string]*sandboxes.ContainerState
	specs      map[string]sandboxes.ContainerSpec // by container id: what each was created with
	blocked    chan struct{}                      // non-nil: starts wait for it (BlockStarts)
	stopsHeld  chan struct{}                      // non-nil: stops wait for it (BlockStops)
	sweeps     int                                // the orphan sweep's listings of workspace volumes
	volumes    map[string]sandboxes.VolumeInfo
	events     chan sandboxes.ContainerEvent
}

// NewEngine makes an empty engine whose agent server is closed when t ends.
func NewEngine(t testing.TB) *Engine {
	e := &Engine{containers: map[string]*sandboxes.ContainerState{}, specs: map[string]sandboxes.ContainerSpec{},
		volumes: map[string]sandboxes.VolumeInfo{}, events: make(chan sandboxes.ContainerEvent)}
	srv := httptest.NewServer(http.HandlerFunc(e.serveAgent))
	t.Cleanup(srv.Close)
	e.agent = strings.TrimPrefix(srv.URL, "http://")
	return e
}

// serveAgent is the agent of every started container: /health answers ready, or, after FailStartups, the 503 a
// real agent answers when its start-up customisation (dependencies, init commands) failed.
func (e *Engine) serveAgent(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/health" {
		http.NotFound(w, r)
		return
	}
	e.mu.Lock()
	failure := e.startup
	e.mu.Unlock()
	if failure != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(agentapi.Health{Status: agentapi.StartupFailed, Error: failure}) //nolint:errcheck // the probe reads what arrives
		return
	}
	w.Write([]byte(`{"status":"ok"}`)) //nolint:errcheck // the Manager's probe reads the status code
}

// FailStartups makes the engine's agent answer, from now on, that its start-up customisation failed with msg (a
// pip install that found no such package, an init command that failed): every start from now on fails as such a
// sandbox's does, with the Manager's startup_failed. "" makes the agent healthy again.
func (e *Engine) FailStartups(msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.startup = msg
}

// namespace is NewManager's: its containers carry "unit.id", the sandbox's id (Die finds them by it).
const namespace = "unit"

// NewManager starts a real Manager of namespace "unit" over a new Engine and a bbolt store in t's temporary
// directory, serving cfg; both are closed when t ends.
func NewManager(t testing.TB, cfg sandboxes.Config) (*sandboxes.Manager, *Engine) {
	t.Helper()
	return NewManagerAt(t, cfg, nil)
}

// NewManagerAt is NewManager whose Manager reads the time from clock (ManagerConfig.Clock: TTLs, expiry, the warm
// pool's window); nil is time.Now.
func NewManagerAt(t testing.TB, cfg sandboxes.Config, clock func() time.Time) (*sandboxes.Manager, *Engine) {
	t.Helper()
	return NewManagerWith(t, cfg, sandboxes.ManagerConfig{Clock: clock})
}

// NewManagerWith is NewManager with mcfg's settings (its clock, instance); its namespace and socket directory
// are NewManager's.
func NewManagerWith(t testing.TB, cfg sandboxes.Config, mcfg sandboxes.ManagerConfig) (*sandboxes.Manager, *Engine) {
	t.Helper()
	return NewManagerIn(t, sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "store.db")), cfg, mcfg)
}

// NewManagerIn is NewManagerWith over st, a store the test also gives what it builds above the Manager: as in the
// gateway, an API's keys, history and exports live in the Manager's one store, beside its sandboxes and
// workspaces. The Manager closes st when t ends.
func NewManagerIn(t testing.TB, st *sandboxes.BoltStore, cfg sandboxes.Config, mcfg sandboxes.ManagerConfig) (*sandboxes.Manager, *Engine) {
	t.Helper()
	e := NewEngine(t)
	dir := t.TempDir()
	mcfg.Namespace, mcfg.SocketDir = namespace, filepath.Join(dir, "sockets")
	m, err := sandboxes.NewManager(mcfg, e, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Start's collection runs in the background: it is over before the test makes anything it could collect.
	WaitFor(t, "the start's collection", func() bool {
		e.mu.Lock()
		swept := e.sweeps > 0
		e.mu.Unlock()
		return swept && !m.GCState().Running
	})
	t.Cleanup(func() {
		// Every sandbox left is deleted first: a network-none one's socket directory is a mount in t's directory.
		for _, sb := range all(m) {
			if err := m.Delete(context.Background(), sb.ID); err != nil {
				t.Errorf("deleting sandbox %s: %v", sb.ID, err)
			}
		}
		m.Close()
	})
	return m, e
}

// all lists every sandbox of m, every owner's.
func all(m *sandboxes.Manager) []*sandboxes.Sandbox {
	var out []*sandboxes.Sandbox
	opts := sandboxes.ListOptions{}
	for {
		page, next, err := m.List(context.Background(), opts)
		if err != nil {
			return out
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		opts.Cursor = next
	}
}

// Check finds nothing to warn about.
func (e *Engine) Check(context.Context) ([]string, error) { return nil, nil }

// EnsureNetwork has every network already.
func (e *Engine) EnsureNetwork(context.Context, string, bool, map[string]string) error { return nil }

// CreateVolume records a volume unless one of that name exists.
func (e *Engine) CreateVolume(_ context.Context, name string, labels map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.volumes[name]; !ok {
		e.volumes[name] = sandboxes.VolumeInfo{Name: name, Labels: maps.Clone(labels), Created: time.Now()}
	}
	return nil
}

// RemoveVolume forgets a volume.
func (e *Engine) RemoveVolume(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.volumes, name)
	return nil
}

// Create records a stopped container, refusing a name in use as Docker does.
func (e *Engine) Create(_ context.Context, spec sandboxes.ContainerSpec) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, c := range e.containers {
		if c.Name == spec.Name {
			return "", fmt.Errorf("the container name %q is already in use by container %q", spec.Name, id)
		}
	}
	e.n++
	id := fmt.Sprintf("c%04d", e.n)
	e.containers[id] = &sandboxes.ContainerState{ID: id, Name: spec.Name, Labels: maps.Clone(spec.Labels), Created: time.Now()}
	spec.Env, spec.Labels = maps.Clone(spec.Env), maps.Clone(spec.Labels)
	e.specs[id] = spec
	return id, nil
}

// Start runs a container and answers the agent server's address; while starts are blocked (BlockStarts) it
// first waits for their release or for ctx to end.
func (e *Engine) Start(ctx context.Context, id string, _ sandboxes.ContainerSpec) (string, error) {
	if err := e.pass(ctx, &e.blocked); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.containers[id]
	if c == nil {
		return "", sandboxes.ErrContainerNotFound
	}
	c.Running = true
	if e.AgentAddr != "" {
		return e.AgentAddr, nil
	}
	return e.agent, nil
}

// Stop stops a container; a missing one is not an error. While stops are blocked (BlockStops) it first waits for
// their release or for ctx to end.
func (e *Engine) Stop(ctx context.Context, id string, _ time.Duration) error {
	if err := e.pass(ctx, &e.stopsHeld); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.containers[id]; c != nil {
		c.Running = false
	}
	return nil
}

// Remove forgets a container; a missing one is not an error.
func (e *Engine) Remove(_ context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.containers, id)
	delete(e.specs, id)
	return nil
}

// Inspect reports a container's state.
func (e *Engine) Inspect(_ context.Context, id string) (sandboxes.ContainerState, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.containers[id]
	if c == nil {
		return sandboxes.ContainerState{}, sandboxes.ErrContainerNotFound
	}
	return *c, nil
}

// List reports the containers carrying every label in match ("" matches any value).
func (e *Engine) List(_ context.Context, match map[string]string) ([]sandboxes.ContainerState, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sandboxes.ContainerState
	for _, c := range e.containers {
		if labelled(c.Labels, match) {
			out = append(out, *c)
		}
	}
	return out, nil
}

// ListVolumes reports the volumes carrying every label in match.
func (e *Engine) ListVolumes(_ context.Context, match map[string]string) ([]sandboxes.VolumeInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := match[namespace+".managed_workspace"]; ok {
		e.sweeps++
	}
	var out []sandboxes.VolumeInfo
	for _, v := range e.volumes {
		if labelled(v.Labels, match) {
			out = append(out, v)
		}
	}
	return out, nil
}

// Events streams nothing: no container of this engine dies by itself.
func (e *Engine) Events(context.Context, string, string) (<-chan sandboxes.ContainerEvent, <-chan error) {
	return e.events, make(chan error)
}

// Close holds no client.
func (e *Engine) Close() error { return nil }

// LeaveOrphanWorkspace makes what a gateway that died between a create's workspace volume and its record leaves
// behind: a workspace volume of m's namespace and instance that no sandbox owns, made an hour ago (older than the
// default orphan_min_age), for m's orphan sweep to find. It answers the volume's name.
func (e *Engine) LeaveOrphanWorkspace(m *sandboxes.Manager) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	name := m.VolumeName(fmt.Sprintf("ws-0bad%08x", e.n))
	e.volumes[name] = sandboxes.VolumeInfo{Name: name, Created: time.Now().Add(-time.Hour), Labels: map[string]string{
		namespace + ".managed": "true", namespace + ".instance": m.Instance(), namespace + ".managed_workspace": "true"}}
	return name
}

// HasVolume says whether the engine holds volume name.
func (e *Engine) HasVolume(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.volumes[name]
	return ok
}

// Running is how many containers run (not stopped, not paused).
func (e *Engine) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.containers {
		if c.Running {
			n++
		}
	}
	return n
}

// Containers is how many containers the engine holds (running or not).
func (e *Engine) Containers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.containers)
}

// Pause freezes a container (the Manager's PauseDriver): it reads paused, not running.
func (e *Engine) Pause(_ context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.containers[id]
	if c == nil {
		return sandboxes.ErrContainerNotFound
	}
	c.Paused, c.Running = true, false
	return nil
}

// Unpause thaws a paused container; one that is not paused is left as it is.
func (e *Engine) Unpause(_ context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.containers[id]
	if c == nil {
		return sandboxes.ErrContainerNotFound
	}
	if c.Paused {
		c.Paused, c.Running = false, true
	}
	return nil
}

// Die kills the running container of sandbox id as the kernel would (exit 137; oom: by the out-of-memory killer)
// and sends the engine's die event, which the Manager's watcher reads before Die returns. It reports whether there
// was such a container.
func (e *Engine) Die(id string, oom bool) bool {
	e.mu.Lock()
	var ev sandboxes.ContainerEvent
	for cid, c := range e.containers {
		if c.Labels[namespace+".id"] == id && c.Running {
			now := time.Now()
			c.Running, c.ExitCode, c.OOMKilled, c.FinishedAt = false, 137, oom, now
			ev = sandboxes.ContainerEvent{ContainerID: cid, Action: "die", Labels: maps.Clone(c.Labels), ExitCode: 137, At: now}
		}
	}
	e.mu.Unlock()
	if ev.ContainerID == "" {
		return false
	}
	e.events <- ev
	return true
}

// BlockStarts holds every start from now on until release is called (once, by the test or when it ends): the
// sandboxes launched meanwhile read starting, as on an engine slow to start them.
func (e *Engine) BlockStarts(t testing.TB) (release func()) {
	return e.block(t, &e.blocked)
}

// BlockStops holds every stop from now on until release is called (once, by the test or when it ends): a
// collection stopping an idle sandbox is under way meanwhile.
func (e *Engine) BlockStops(t testing.TB) (release func()) {
	return e.block(t, &e.stopsHeld)
}

// pass waits until the gate a block set (*gate) is released, or for ctx to end; an open gate (nil) passes at once.
func (e *Engine) pass(ctx context.Context, gate *chan struct{}) error {
	e.mu.Lock()
	held := *gate
	e.mu.Unlock()
	if held == nil {
		return nil
	}
	select {
	case <-held:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// block sets *gate to a new channel that release closes (and clears).
func (e *Engine) block(t testing.TB, gate *chan struct{}) (release func()) {
	ch := make(chan struct{})
	e.mu.Lock()
	*gate = ch
	e.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			e.mu.Lock()
			*gate = nil
			e.mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

// Spec is the container spec the Manager created sandbox id's container with; false when it has none (yet: a
// cold create makes it in the background).
func (e *Engine) Spec(id string) (sandboxes.ContainerSpec, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for cid, c := range e.containers {
		if c.Labels[namespace+".id"] == id {
			spec := e.specs[cid]
			spec.Env, spec.Labels = maps.Clone(spec.Env), maps.Clone(spec.Labels)
			return spec, true
		}
	}
	return sandboxes.ContainerSpec{}, false
}

// CallerEnv is the environment sandbox id's container was created with, less the variables the Manager adds for
// its agent (token digest, sandbox id, capabilities, and an injected image's HOME): what its create and profile
// asked for. false when it has no container yet.
func (e *Engine) CallerEnv(id string) (map[string]string, bool) {
	spec, ok := e.Spec(id)
	if !ok {
		return nil, false
	}
	env := spec.Env
	delete(env, agentapi.EnvTokenDigest)
	delete(env, agentapi.EnvSandboxID)
	delete(env, agentapi.EnvCapabilities)
	if spec.Profile.InjectsAgent() && env["HOME"] == sandboxes.SandboxHome {
		delete(env, "HOME")
	}
	return env, true
}

func labelled(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || (v != "" && hv != v) {
			return false
		}
	}
	return true
}

// WaitStatus waits, up to 10s, for sandbox id to read st on m: a cold create is starting and becomes ready in the
// background, a death is recorded after the engine's event is read.
func WaitStatus(t testing.TB, m *sandboxes.Manager, id string, st sandboxes.Status) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("sandbox %s to read %s", id, st), func() bool {
		sb, err := m.Get(context.Background(), id)
		return err == nil && sb.Status == st
	})
}

// WaitFor waits, up to 10s, for cond to hold (what the Manager does in the background: a start, a warm refill);
// it fails t naming what it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polls the observable state; the deadline bounds it
	}
}

// Clock is a test's clock: it stands still until the test moves it. Its zero value reads the zero time; make one
// with NewClock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a clock reading now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now reads the clock (a ManagerConfig.Clock).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
