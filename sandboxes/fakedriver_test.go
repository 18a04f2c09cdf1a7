package sandboxes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// fakeDriver is an in-memory engine for unit tests of the Manager's logic: every started container's agent is
// one healthy test server.
type fakeDriver struct {
	mu         sync.Mutex
	addr       string
	containers map[string]*fakeContainer
	volumes    map[string]VolumeInfo
	networks   map[string]int
	events     chan ContainerEvent
	creates    int
	startDelay time.Duration
	failCreate bool
	// absentImages are the images ImagePresent reports the engine does not hold; imageChecks counts its calls.
	absentImages map[string]bool
	imageChecks  int
	// attempts counts Create calls (failed ones too); peak is the most containers that existed at once; names
	// lists created containers in order.
	attempts int
	peak     int
	names    []string
	// removeDelay makes Remove take a while, as Docker's does; startupFailure makes every agent's /health answer
	// that its start-up customisation failed with this message.
	removeDelay    time.Duration
	startupFailure string
	// volumeLists counts ListVolumes calls (the orphan sweep's).
	volumeLists int
	// stopGate, when set, holds every Stop until it is closed; stopsDone counts the Stops that returned.
	stopGate  chan struct{}
	stopsDone int
	// startGate, when set, holds every Start until it is closed.
	startGate chan struct{}
	// exitAtStart, when set, makes the next Start report that the container exited at once, with no die event
	// (the launch sees the death before the engine's event is handled).
	exitAtStart *ExitedError
	// honourCancel makes Remove and RemoveVolume fail with the context's error once it is done, as the Engine API
	// client does.
	honourCancel bool
	// agentFor, when set, gives each started container its own agent address instead of the shared server's.
	agentFor func(containerID string) string
	// claims are the POST /v1/claim bodies the agent took, by the token presented (warm_image.go); peakAwaiting is
	// the most containers made in the waiting form (agentapi.EnvAwaitClaim) that existed at once.
	claims       map[string]agentapi.ClaimRequest
	peakAwaiting int
	// refuseClaims makes the agent answer every claim 500.
	refuseClaims bool
}

type fakeContainer struct {
	state ContainerState
	spec  ContainerSpec
}

func newFakeDriver(t *testing.T) *fakeDriver {
	d := &fakeDriver{containers: map[string]*fakeContainer{}, volumes: map[string]VolumeInfo{}, networks: map[string]int{},
		events: make(chan ContainerEvent, 16), claims: map[string]agentapi.ClaimRequest{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == agentapi.ClaimPath && r.Method == http.MethodPost {
			var c agentapi.ClaimRequest
			if err := json.NewDecoder(r.Body).Decode(&c); err != nil || c.Validate() != nil {
				http.Error(w, "bad claim", http.StatusBadRequest)
				return
			}
			d.mu.Lock()
			refuse := d.refuseClaims
			if !refuse {
				d.claims[r.Header.Get(agentapi.TokenHeader)] = c
			}
			d.mu.Unlock()
			if refuse {
				http.Error(w, "refused", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.URL.Path == "/health" {
			d.mu.Lock()
			failure := d.startupFailure
			d.mu.Unlock()
			if failure != "" {
				w.WriteHeader(http.StatusServiceUnavailable)
				json.NewEncoder(w).Encode(map[string]string{"status": "failed", "error": failure})
				return
			}
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	d.addr = strings.TrimPrefix(srv.URL, "http://")
	return d
}

func (d *fakeDriver) Check(context.Context) ([]string, error) { return nil, nil }
func (d *fakeDriver) EnsureNetwork(_ context.Context, name string, _ bool, _ map[string]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.networks[name]++
	return nil
}
func (d *fakeDriver) CreateVolume(_ context.Context, name string, labels map[string]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.volumes[name]; !ok {
		d.volumes[name] = VolumeInfo{Name: name, Labels: labels, Created: time.Now()}
	}
	return nil
}
func (d *fakeDriver) RemoveVolume(ctx context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.honourCancel && ctx.Err() != nil {
		return ctx.Err()
	}
	delete(d.volumes, name)
	return nil
}
func (d *fakeDriver) Create(_ context.Context, spec ContainerSpec) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.attempts++
	if d.failCreate {
		return "", fmt.Errorf("no such image %s", spec.Image)
	}
	for id, c := range d.containers {
		if c.spec.Name == spec.Name {
			return "", fmt.Errorf("the container name %q is already in use by container %q", spec.Name, id)
		}
	}
	d.creates++
	id := fmt.Sprintf("c%04d", d.creates)
	d.containers[id] = &fakeContainer{spec: spec, state: ContainerState{ID: id, Name: spec.Name, Labels: spec.Labels, Created: time.Now()}}
	d.peak = max(d.peak, len(d.containers))
	awaiting := 0
	for _, c := range d.containers {
		if c.spec.Env[agentapi.EnvAwaitClaim] == "1" {
			awaiting++
		}
	}
	d.peakAwaiting = max(d.peakAwaiting, awaiting)
	d.names = append(d.names, spec.Name)
	return id, nil
}
func (d *fakeDriver) Start(ctx context.Context, id string, _ ContainerSpec) (string, error) {
	d.mu.Lock()
	gate := d.startGate
	d.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if d.startDelay > 0 {
		select {
		case <-time.After(d.startDelay):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.containers[id]
	if c == nil {
		return "", ErrContainerNotFound
	}
	if exited := d.exitAtStart; exited != nil {
		d.exitAtStart = nil
		c.state.ExitCode = exited.ExitCode
		return "", exited
	}
	c.state.Running = true
	if d.agentFor != nil {
		return d.agentFor(id), nil
	}
	return d.addr, nil
}
func (d *fakeDriver) Stop(_ context.Context, id string, _ time.Duration) error {
	d.mu.Lock()
	gate := d.stopGate
	d.mu.Unlock()
	if gate != nil {
		<-gate
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.containers[id]; c != nil {
		c.state.Running = false
	}
	d.stopsDone++
	return nil
}
func (d *fakeDriver) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	delay := d.removeDelay
	d.mu.Unlock()
	time.Sleep(delay)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.honourCancel && ctx.Err() != nil {
		return ctx.Err()
	}
	delete(d.containers, id)
	return nil
}
func (d *fakeDriver) Inspect(_ context.Context, id string) (ContainerState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.containers[id]
	if c == nil {
		return ContainerState{}, ErrContainerNotFound
	}
	return c.state, nil
}
func (d *fakeDriver) List(_ context.Context, match map[string]string) ([]ContainerState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ContainerState
	for _, c := range d.containers {
		if labelsMatch(c.state.Labels, match) {
			out = append(out, c.state)
		}
	}
	return out, nil
}
func (d *fakeDriver) ListVolumes(_ context.Context, match map[string]string) ([]VolumeInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.volumeLists++
	var out []VolumeInfo
	for _, v := range d.volumes {
		if labelsMatch(v.Labels, match) {
			out = append(out, v)
		}
	}
	return out, nil
}
func (d *fakeDriver) Events(ctx context.Context, _, _ string) (<-chan ContainerEvent, <-chan error) {
	return d.events, make(chan error)
}
func (d *fakeDriver) Close() error { return nil }

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || (v != "" && hv != v) {
			return false
		}
	}
	return true
}

func (d *fakeDriver) die(id string, code int, oom bool) {
	d.mu.Lock()
	c := d.containers[id]
	c.state.Running, c.state.ExitCode, c.state.OOMKilled = false, code, oom
	labels := c.state.Labels
	d.mu.Unlock()
	d.events <- ContainerEvent{ContainerID: id, Action: "die", Labels: labels, ExitCode: code, At: time.Now()}
}

func (d *fakeDriver) count() (containers, volumes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.containers), len(d.volumes)
}

func testProfile(id string) Profile {
	return Profile{ID: id, Image: "img", Capabilities: []string{CapShell}}
}

func newTestManager(t *testing.T, cfg Config) (*Manager, *fakeDriver, string) {
	t.Helper()
	d := newFakeDriver(t)
	path := t.TempDir() + "/store.db"
	m := startTestManager(t, d, path, cfg)
	return m, d, path
}

func startTestManager(t *testing.T, d *fakeDriver, path string, cfg Config) *Manager {
	t.Helper()
	return startManagerOn(t, d, NewBoltStore(path), cfg)
}

// startManagerOn starts a Manager of namespace "unit" on d and st with cfg, closed when t ends.
func startManagerOn(t *testing.T, d Driver, st Store, cfg Config) *Manager {
	t.Helper()
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// The collection Start asks for runs in the background: it is over before the test changes what it would
	// collect (an expiry the test sets by hand, say, which it would otherwise handle in the test's stead).
	waitFor(t, func() bool { return m.GCState().Collections > 0 })
	return m
}

func mustReady(t *testing.T, m *Manager, id string) Target {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tg, err := m.EnsureRunning(ctx, id)
	if err != nil {
		t.Fatalf("ensure running %s: %v", id, err)
	}
	return tg
}

// expireNow moves a sandbox's expiry into the past. Tests that need an expired sandbox use it instead of a short
// TTL and a sleep: on a busy machine a short TTL can pass before the sandbox is even ready.
func expireNow(t *testing.T, m *Manager, id string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	if e == nil {
		t.Fatalf("expireNow: no sandbox %s", id)
	}
	past := time.Now().Add(-time.Second)
	e.rec.ExpiresAt = &past
}

func (d *fakeDriver) ImagePresent(_ context.Context, image string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.imageChecks++
	if d.absentImages[image] {
		return Errorf(CodeImageNotFound, "image %q is not on the engine", image)
	}
	return nil
}
