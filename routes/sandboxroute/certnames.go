package sandboxroute

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// Defaults of CertPolicyConfig.
const (
	DefaultCertBurst    = 8
	DefaultCertInterval = time.Minute
	DefaultPortsTTL     = 5 * time.Second
	// portsCallTimeout bounds one agent call for a sandbox's listening ports; the answer is shared by every
	// handshake waiting for it, so it must not depend on the first one's deadline.
	portsCallTimeout = 5 * time.Second
	// maxPortsEntries bounds the listing cache: one entry per running sandbox asked about recently.
	maxPortsEntries = 100_000
)

// CertDenied is a name on-demand TLS may not obtain a certificate for, with the reason (for the log: the TLS
// client only sees a failed handshake).
type CertDenied struct {
	Name   string
	Reason string
}

func (e *CertDenied) Error() string { return e.Name + ": " + e.Reason }

// CertSandboxes is what the policy needs of the sandbox Manager; every method answers from memory.
type CertSandboxes interface {
	// Exists reports whether id names a live (not expired, not deleted) sandbox.
	Exists(id string) bool
	Get(ctx context.Context, id string) (*sandboxes.Sandbox, error)
	Profile(id string) (sandboxes.Profile, bool)
	// Resolve returns the agent of a running sandbox; false when it is not running (idle, starting, dead).
	Resolve(id string) (sandboxes.Target, bool)
}

// PortLister asks a running sandbox's agent which TCP ports listen inside it.
type PortLister interface {
	ListeningPorts(ctx context.Context, t sandboxes.Target) (agentapi.ListeningPorts, error)
}

// AgentPorts is the PortLister that calls the agent's GET /v1/ports.
type AgentPorts struct {
	// HTTP reaches agents; nil means http.DefaultClient.
	HTTP *http.Client
}

// ListeningPorts calls GET /v1/ports on t's agent.
func (a AgentPorts) ListeningPorts(ctx context.Context, t sandboxes.Target) (agentapi.ListeningPorts, error) {
	return agentapi.NewClientFor(t.Addr, t.Token, a.HTTP).Ports(ctx)
}

// CertPolicyConfig configures a CertPolicy.
type CertPolicyConfig struct {
	BaseDomains []string
	Sandboxes   CertSandboxes
	// Ports lists running sandboxes' listening ports; nil approves declared ports only.
	Ports PortLister
	// PortsTTL is how long one listing of a sandbox answers for every name of that sandbox, approving or refusing;
	// 0 means DefaultPortsTTL.
	PortsTTL time.Duration
	// Burst new names are approved at once per sandbox, one more per Interval; 0 means the defaults.
	Burst    int
	Interval time.Duration
}

// CertPolicy decides which names on-demand TLS may obtain a certificate for: the canonical names of a live sandbox
// under a base domain, {id}.{base}, and {port}-{id}.{base} for a port its profile declares or that something in
// the running sandbox listens on where the agent's port proxy reaches it, spelt without leading zeros. Any other
// name is refused before an ACME order is placed, and each sandbox gets a budget of new names: every approval is
// an order, and a sandbox must not spend the gateway's issuance quota.
//
// Names are checked cheapest first, and only a live, running sandbox's undeclared port costs an agent call. Those
// calls are bounded however names are chosen: one listing per sandbox answers every port of it for PortsTTL
// (ports it lacks are refused from the cache, a negative cache keyed by sandbox, not by name), and concurrent
// handshakes for one sandbox share one call. An attacker hammering random names therefore causes at most one agent
// call per running sandbox per PortsTTL.
type CertPolicy struct {
	cfg   CertPolicyConfig
	limit *nameLimiter
	now   func() time.Time

	mu     sync.Mutex
	ports  map[string]portsEntry
	flight singleflight.Group
}

type portsEntry struct {
	at      time.Time
	proxied map[int]bool
	err     error
}

// NewCertPolicy returns a policy; base domains are lower-cased and trimmed of dots.
func NewCertPolicy(cfg CertPolicyConfig) (*CertPolicy, error) {
	if len(cfg.BaseDomains) == 0 {
		return nil, fmt.Errorf("certificate policy: at least one base domain is required")
	}
	if cfg.Sandboxes == nil {
		return nil, fmt.Errorf("certificate policy: no sandbox registry")
	}
	domains := make([]string, 0, len(cfg.BaseDomains))
	for _, b := range cfg.BaseDomains {
		b = strings.Trim(strings.ToLower(b), ".")
		if b == "" {
			return nil, fmt.Errorf("certificate policy: empty base domain")
		}
		domains = append(domains, b)
	}
	cfg.BaseDomains = domains
	if cfg.PortsTTL <= 0 {
		cfg.PortsTTL = DefaultPortsTTL
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultCertBurst
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultCertInterval
	}
	return &CertPolicy{cfg: cfg, limit: newNameLimiter(cfg.Burst, cfg.Interval), now: time.Now, ports: map[string]portsEntry{}}, nil
}

// BaseDomains are the normalised base domains.
func (p *CertPolicy) BaseDomains() []string { return p.cfg.BaseDomains }

// Allowed returns nil when a certificate may be obtained for name, otherwise a *CertDenied.
func (p *CertPolicy) Allowed(ctx context.Context, name string) error {
	a, ok := ParseHost(name, p.cfg.BaseDomains)
	if !ok {
		return &CertDenied{Name: name, Reason: "not a sandbox name under " + strings.Join(p.cfg.BaseDomains, ", ")}
	}
	canonical := strings.ToLower(strings.TrimSuffix(name, "."))
	label, _, _ := strings.Cut(canonical, ".")
	want := a.SandboxID
	if a.Port != 0 {
		want = strconv.Itoa(a.Port) + "-" + a.SandboxID
	}
	if label != want {
		return &CertDenied{Name: name, Reason: "not the canonical spelling (" + want + ")"}
	}
	if !p.cfg.Sandboxes.Exists(a.SandboxID) {
		return &CertDenied{Name: name, Reason: "no live sandbox " + a.SandboxID}
	}
	if a.Port != 0 && !p.declares(ctx, a.SandboxID, a.Port) {
		if err := p.listening(a.SandboxID, a.Port); err != nil {
			return &CertDenied{Name: name, Reason: err.Error()}
		}
	}
	if !p.limit.allow(a.SandboxID, canonical, p.now()) {
		return &CertDenied{Name: name, Reason: "sandbox " + a.SandboxID + " has had too many certificate names approved recently"}
	}
	return nil
}

// declares reports whether the sandbox's profile routes or runs a service on port.
func (p *CertPolicy) declares(ctx context.Context, id string, port int) bool {
	if t, ok := p.cfg.Sandboxes.Resolve(id); ok && t.AppPort == port {
		return true
	}
	sb, err := p.cfg.Sandboxes.Get(ctx, id)
	if err != nil || sb == nil {
		return false
	}
	prof, ok := p.cfg.Sandboxes.Profile(sb.Profile)
	if !ok {
		return false
	}
	if prof.AppTarget() == port {
		return true
	}
	for _, s := range prof.Services {
		if s.Port == port {
			return true
		}
	}
	return false
}

// listening returns nil when port listens in the running sandbox id where the port proxy reaches it, from a
// listing at most PortsTTL old.
func (p *CertPolicy) listening(id string, port int) error {
	if p.cfg.Ports == nil {
		return fmt.Errorf("port %d is not declared by sandbox %s's profile", port, id)
	}
	t, ok := p.cfg.Sandboxes.Resolve(id)
	if !ok {
		return fmt.Errorf("port %d is not declared and sandbox %s is not running", port, id)
	}
	e := p.listing(t)
	if e.err != nil {
		return fmt.Errorf("port %d is not declared and sandbox %s's listening ports are unknown: %w", port, id, e.err)
	}
	if !e.proxied[port] {
		return fmt.Errorf("port %d is neither declared nor listening (on 0.0.0.0, :: or 127.0.0.1) in sandbox %s", port, id)
	}
	return nil
}

// listing returns the sandbox's cached listing, asking its agent when there is none younger than PortsTTL.
// Concurrent callers for one sandbox share one call; a failed call is cached too, so a hung agent is not asked
// again by every handshake.
func (p *CertPolicy) listing(t sandboxes.Target) portsEntry {
	if e, ok := p.cached(t.SandboxID); ok {
		return e
	}
	v, _, _ := p.flight.Do(t.SandboxID, func() (any, error) {
		if e, ok := p.cached(t.SandboxID); ok { // a flight that ended between our look and Do
			return e, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), portsCallTimeout)
		defer cancel()
		res, err := p.cfg.Ports.ListeningPorts(ctx, t)
		e := portsEntry{at: p.now(), proxied: map[int]bool{}, err: err}
		for _, lp := range res.Ports {
			if lp.Proxied() {
				e.proxied[lp.Port] = true
			}
		}
		p.store(t.SandboxID, e)
		return e, nil
	})
	return v.(portsEntry)
}

func (p *CertPolicy) cached(id string) (portsEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.ports[id]
	if !ok || p.now().Sub(e.at) >= p.cfg.PortsTTL {
		return portsEntry{}, false
	}
	return e, true
}

func (p *CertPolicy) store(id string, e portsEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ports) >= maxPortsEntries {
		now := p.now()
		for k, v := range p.ports {
			if now.Sub(v.at) >= p.cfg.PortsTTL {
				delete(p.ports, k)
			}
		}
		// Still full of fresh entries: forgetting any of them only costs that sandbox one more call.
		for k := range p.ports {
			if len(p.ports) < maxPortsEntries {
				break
			}
			delete(p.ports, k)
		}
	}
	p.ports[id] = e
}

// nameLimiter is a token bucket per sandbox for new certificate names; a name approved before costs nothing.
type nameLimiter struct {
	mu    sync.Mutex
	burst int
	every time.Duration
	boxes map[string]*nameBucket
}

type nameBucket struct {
	tokens float64
	at     time.Time
	names  map[string]bool
}

func newNameLimiter(burst int, every time.Duration) *nameLimiter {
	return &nameLimiter{burst: burst, every: every, boxes: map[string]*nameBucket{}}
}

func (l *nameLimiter) allow(id, name string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.boxes[id]
	if b == nil {
		if len(l.boxes) > 100_000 { // forget sandboxes whose buckets are full again
			for k, v := range l.boxes {
				if now.Sub(v.at) > time.Duration(l.burst)*l.every {
					delete(l.boxes, k)
				}
			}
		}
		b = &nameBucket{tokens: float64(l.burst), at: now, names: map[string]bool{}}
		l.boxes[id] = b
	}
	if b.names[name] {
		return true
	}
	b.tokens = min(float64(l.burst), b.tokens+float64(now.Sub(b.at))/float64(l.every))
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	b.names[name] = true
	return true
}
