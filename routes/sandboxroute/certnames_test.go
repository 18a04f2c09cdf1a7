package sandboxroute

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// fakeRegistry is a Manager with live sandboxes (id -> profile), some of them running, and profiles.
type fakeRegistry struct {
	live     map[string]string
	running  map[string]bool
	profiles map[string]sandboxes.Profile
}

func (f fakeRegistry) Exists(id string) bool { _, ok := f.live[id]; return ok }

func (f fakeRegistry) Get(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	prof, ok := f.live[id]
	if !ok {
		return nil, sandboxes.Errorf(sandboxes.CodeNotFound, "no sandbox %s", id)
	}
	return &sandboxes.Sandbox{ID: id, Profile: prof}, nil
}

func (f fakeRegistry) Profile(id string) (sandboxes.Profile, bool) {
	p, ok := f.profiles[id]
	return p, ok
}

func (f fakeRegistry) Resolve(id string) (sandboxes.Target, bool) {
	if !f.running[id] {
		return sandboxes.Target{}, false
	}
	prof := f.profiles[f.live[id]]
	return sandboxes.Target{SandboxID: id, Addr: "agent-of-" + id, AppPort: prof.AppTarget()}, true
}

// countingPorts is an agent that lists fixed sockets per sandbox and counts the calls it gets.
type countingPorts struct {
	mu    sync.Mutex
	ports map[string][]agentapi.ListeningPort
	err   error
	calls map[string]int
	// gate, when set, holds every call until it is closed (to make concurrent handshakes overlap).
	gate    chan struct{}
	entered atomic.Int64
}

func (c *countingPorts) ListeningPorts(_ context.Context, t sandboxes.Target) (agentapi.ListeningPorts, error) {
	c.entered.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[t.SandboxID]++
	return agentapi.ListeningPorts{Ports: c.ports[t.SandboxID]}, c.err
}

func (c *countingPorts) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *countingPorts) set(id string, ports ...agentapi.ListeningPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ports == nil {
		c.ports = map[string][]agentapi.ListeningPort{}
	}
	c.ports[id] = ports
}

// fakeClock is a clock the test moves by hand, so cache expiry never races the wall clock.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newTestPolicy(t *testing.T, reg fakeRegistry, ports PortLister, burst int) (*CertPolicy, *fakeClock) {
	t.Helper()
	p, err := NewCertPolicy(CertPolicyConfig{BaseDomains: []string{".SB.Example.com."}, Sandboxes: reg, Ports: ports,
		PortsTTL: 5 * time.Second, Burst: burst, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.ns.Store(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC).UnixNano())
	p.now = clock.now
	return p, clock
}

func webRegistry() fakeRegistry {
	return fakeRegistry{
		live:    map[string]string{"sandbox-1": "web", "sandbox-idle": "web"},
		running: map[string]bool{"sandbox-1": true},
		profiles: map[string]sandboxes.Profile{"web": {ID: "web", AppPort: 3000,
			Services: []sandboxes.Service{{Name: "api", Port: 8080}}}},
	}
}

// TestCertPolicy: only canonical names of live sandboxes are approved, with ports that are declared or listen where
// the port proxy reaches them; every other spelling, port and sandbox is refused with a *CertDenied.
func TestCertPolicy(t *testing.T) {
	ports := &countingPorts{}
	ports.set("sandbox-1",
		agentapi.ListeningPort{Port: 5173, Address: "::", Scope: agentapi.ScopeAll},
		agentapi.ListeningPort{Port: 4000, Address: "0.0.0.0", Scope: agentapi.ScopeAll},
		agentapi.ListeningPort{Port: 4001, Address: "127.0.0.1", Scope: agentapi.ScopeLoopback},
		agentapi.ListeningPort{Port: 4002, Address: "::1", Scope: agentapi.ScopeLoopback},
		agentapi.ListeningPort{Port: 4003, Address: "172.18.0.2", Scope: agentapi.ScopeInterface},
		agentapi.ListeningPort{Port: 7777, Address: "0.0.0.0", Scope: agentapi.ScopeAll, Reserved: "it is the agent's own port"},
	)
	ports.set("sandbox-idle", agentapi.ListeningPort{Port: 5173, Address: "::", Scope: agentapi.ScopeAll})
	p, _ := newTestPolicy(t, webRegistry(), ports, 100)
	tests := []struct {
		name string
		ok   bool
	}{
		{"sandbox-1.sb.example.com", true},
		{"3000-sandbox-1.sb.example.com", true},
		{"8080-sandbox-1.sb.example.com", true},
		{"5173-sandbox-1.sb.example.com", true},
		{"4000-sandbox-1.sb.example.com", true},
		{"4001-sandbox-1.sb.example.com", true},
		{"SANDBOX-1.SB.EXAMPLE.COM", true},
		{"sandbox-1.sb.example.com.", true},
		{"4002-sandbox-1.sb.example.com", false}, // ::1 only: the proxy dials 127.0.0.1
		{"4003-sandbox-1.sb.example.com", false}, // one interface's address: the proxy dials 127.0.0.1
		{"7777-sandbox-1.sb.example.com", false}, // the agent's own port
		{"05173-sandbox-1.sb.example.com", false},
		{"03000-sandbox-1.sb.example.com", false},
		{"00001-sandbox-1.sb.example.com", false},
		{"1-sandbox-1.sb.example.com", false},
		{"3001-sandbox-1.sb.example.com", false},
		{"65535-sandbox-1.sb.example.com", false},
		{"sandbox-idle.sb.example.com", true},
		{"3000-sandbox-idle.sb.example.com", true},
		{"5173-sandbox-idle.sb.example.com", false}, // not running: its agent is not asked, only declared ports count
		{"sandbox-2.sb.example.com", false},
		{"5173-sandbox-2.sb.example.com", false},
		{"x.sandbox-1.sb.example.com", false},
		{"sb.example.com", false},
		{"sandbox-1.example.com", false},
		{"www.google.com", false},
	}
	for _, tc := range tests {
		err := p.Allowed(context.Background(), tc.name)
		if tc.ok != (err == nil) {
			t.Errorf("Allowed(%q) = %v", tc.name, err)
		}
		var denied *CertDenied
		if err != nil && !errors.As(err, &denied) {
			t.Errorf("Allowed(%q) is not a *CertDenied: %v", tc.name, err)
		}
	}
	if ports.calls["sandbox-idle"] != 0 || ports.calls["sandbox-1"] != 1 {
		t.Errorf("agent calls = %v; want one for the running sandbox, none for the idle one", ports.calls)
	}

	// Without a port lister only declared ports count.
	declared, _ := newTestPolicy(t, webRegistry(), nil, 100)
	if err := declared.Allowed(context.Background(), "5173-sandbox-1.sb.example.com"); err == nil {
		t.Error("a policy without a port lister approved an undeclared port")
	}
}

// TestCertPolicyListingIsFresh: a port that starts listening is approved once the cached listing is older than
// PortsTTL, and an agent that fails is asked again only after PortsTTL.
func TestCertPolicyListingIsFresh(t *testing.T) {
	ports := &countingPorts{}
	p, clock := newTestPolicy(t, webRegistry(), ports, 100)
	ctx := context.Background()
	if err := p.Allowed(ctx, "5173-sandbox-1.sb.example.com"); err == nil {
		t.Fatal("approved before anything listens")
	}
	ports.set("sandbox-1", agentapi.ListeningPort{Port: 5173, Address: "0.0.0.0", Scope: agentapi.ScopeAll})
	if err := p.Allowed(ctx, "5173-sandbox-1.sb.example.com"); err == nil {
		t.Fatal("approved from a listing younger than PortsTTL that lacks the port")
	}
	clock.advance(5 * time.Second)
	if err := p.Allowed(ctx, "5173-sandbox-1.sb.example.com"); err != nil {
		t.Fatalf("listening port refused after PortsTTL: %v", err)
	}
	if ports.total() != 2 {
		t.Fatalf("agent calls = %d, want 2", ports.total())
	}

	ports.err = errors.New("agent unreachable")
	clock.advance(5 * time.Second)
	for range 10 {
		if err := p.Allowed(ctx, "5174-sandbox-1.sb.example.com"); err == nil {
			t.Fatal("approved with a failing agent")
		}
	}
	if ports.total() != 3 {
		t.Fatalf("agent calls = %d, want 3: a failure is cached for PortsTTL too", ports.total())
	}
}

// TestCertPolicyHammeringCostsOneAgentCall performs the attack: thousands of concurrent handshakes for random
// names (random ports of a live running sandbox, random unknown sandboxes, non-canonical spellings, foreign
// domains) make at most one agent call per running sandbox per PortsTTL, and place no more approvals than the
// sandbox's budget. Counted, not timed.
func TestCertPolicyHammeringCostsOneAgentCall(t *testing.T) {
	ports := &countingPorts{gate: make(chan struct{})}
	ports.set("sandbox-1", agentapi.ListeningPort{Port: 5173, Address: "::", Scope: agentapi.ScopeAll})
	p, clock := newTestPolicy(t, webRegistry(), ports, 3)
	ctx := context.Background()

	names := func(round int) []string {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		var out []string
		for i := range 4000 {
			switch i % 4 {
			case 0:
				out = append(out, fmt.Sprintf("%d-sandbox-1.sb.example.com", 1+rng.IntN(65535)))
			case 1:
				out = append(out, fmt.Sprintf("%d-sandbox-%x.sb.example.com", 1+rng.IntN(65535), rng.Uint64()))
			case 2:
				out = append(out, fmt.Sprintf("0%d-sandbox-1.sb.example.com", rng.IntN(65535)))
			default:
				out = append(out, fmt.Sprintf("x%x.attacker.example", rng.Uint64()))
			}
		}
		return out
	}
	var approved atomic.Int64
	hammer := func(round int) {
		var wg sync.WaitGroup
		work := make(chan string)
		for range 32 {
			wg.Go(func() {
				for name := range work {
					if p.Allowed(ctx, name) == nil {
						approved.Add(1)
					}
				}
			})
		}
		for _, n := range names(round) {
			work <- n
		}
		close(work)
		wg.Wait()
	}

	// Round one: every handshake that needs the listing piles up behind one held agent call.
	done := make(chan struct{})
	go func() { hammer(1); close(done) }()
	waitFor(t, func() bool { return ports.entered.Load() > 0 })
	close(ports.gate)
	<-done
	if n := ports.total(); n != 1 {
		t.Fatalf("round one made %d agent calls, want 1", n)
	}
	// Rounds two and three, within and after PortsTTL: no call, then exactly one more.
	hammer(2)
	if n := ports.total(); n != 1 {
		t.Fatalf("a second round within PortsTTL made %d agent calls in all, want 1", n)
	}
	clock.advance(5 * time.Second)
	hammer(3)
	if n := ports.total(); n != 2 {
		t.Fatalf("a round after PortsTTL made %d agent calls in all, want 2", n)
	}
	// 5173 is the only listening port, and a random port may hit a declared one: at most the budget of 3.
	if n := approved.Load(); n > 3 {
		t.Fatalf("%d names approved, more than the sandbox's budget", n)
	}
}

// waitFor polls an in-memory condition: the test waits for observable state, not for time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNameLimiter: a sandbox gets at most the burst of new names, then one per interval; names it already had stay
// approved, and another sandbox is unaffected.
func TestNameLimiter(t *testing.T) {
	l := newNameLimiter(2, time.Minute)
	now := time.Now()
	for i, tc := range []struct {
		id, name string
		at       time.Duration
		ok       bool
	}{
		{"a", "a1", 0, true}, {"a", "a2", 0, true}, {"a", "a3", 0, false}, {"a", "a1", 0, true},
		{"b", "b1", 0, true}, {"a", "a3", 30 * time.Second, false}, {"a", "a3", 61 * time.Second, true},
		{"a", "a4", 62 * time.Second, false},
	} {
		if got := l.allow(tc.id, tc.name, now.Add(tc.at)); got != tc.ok {
			t.Errorf("%d: allow(%s, %s) = %v", i, tc.id, tc.name, got)
		}
	}
}

func TestNewCertPolicyErrors(t *testing.T) {
	for _, cfg := range []CertPolicyConfig{
		{Sandboxes: webRegistry()},
		{BaseDomains: []string{"..."}, Sandboxes: webRegistry()},
		{BaseDomains: []string{"sb.example.com"}},
	} {
		if _, err := NewCertPolicy(cfg); err == nil {
			t.Errorf("NewCertPolicy(%+v) accepted", cfg)
		}
	}
}
