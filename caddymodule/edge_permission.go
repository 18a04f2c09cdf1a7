package caddymodule

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
)

func init() {
	caddy.RegisterModule(new(SandboxPermission))
}

// SandboxPermission is the `tls.permission.sandbox` on-demand TLS permission: a certificate may be obtained only
// for the canonical names of a live sandbox under a configured base domain: {id}.{base}, and {port}-{id}.{base} for
// a port its profile declares (app_port, services' ports), spelt without leading zeros. Any other name (random SNI,
// other domains, dead sandboxes, "00001-{id}", undeclared ports) is refused before an ACME order is placed, and
// each sandbox may have at most CertBurst new names approved at once, one more per CertInterval: every approval
// is an ACME order, and a sandbox must not be able to spend the gateway's issuance quota.
type SandboxPermission struct {
	BaseDomains []string `json:"base_domains"`
	// CertBurst and CertInterval rate-limit new names per sandbox; 0 means 8 and 1m.
	CertBurst    int            `json:"cert_burst,omitempty"`
	CertInterval caddy.Duration `json:"cert_interval,omitempty"`

	sandboxes sandboxNames
	limit     *nameLimiter
}

// sandboxNames is what the permission needs of the Manager.
type sandboxNames interface {
	Get(ctx context.Context, id string) (*sandboxes.Sandbox, error)
	Profile(id string) (sandboxes.Profile, bool)
}

// CaddyModule returns the Caddy module information.
func (*SandboxPermission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.permission.sandbox", New: func() caddy.Module { return new(SandboxPermission) }}
}

// Provision links the permission to the sandbox Manager.
func (p *SandboxPermission) Provision(ctx caddy.Context) error {
	if len(p.BaseDomains) == 0 {
		return fmt.Errorf("tls.permission.sandbox: base_domains is required")
	}
	for i, b := range p.BaseDomains {
		p.BaseDomains[i] = strings.Trim(strings.ToLower(b), ".")
		if p.BaseDomains[i] == "" {
			return fmt.Errorf("tls.permission.sandbox: empty base domain")
		}
	}
	mgr, err := sandboxManager(ctx)
	if err != nil {
		return fmt.Errorf("tls.permission.sandbox: %w", err)
	}
	p.sandboxes = mgr
	burst, every := p.CertBurst, time.Duration(p.CertInterval)
	if burst <= 0 {
		burst = 8
	}
	if every <= 0 {
		every = time.Minute
	}
	p.limit = newNameLimiter(burst, every)
	return nil
}

// CertificateAllowed allows the canonical names of live sandboxes only, within the sandbox's issuance budget.
func (p *SandboxPermission) CertificateAllowed(ctx context.Context, name string) error {
	a, ok := sandboxroute.ParseHost(name, p.BaseDomains)
	if !ok {
		return fmt.Errorf("%w: %s is not a sandbox name under %s", caddytls.ErrPermissionDenied, name, strings.Join(p.BaseDomains, ", "))
	}
	canonical := strings.ToLower(strings.TrimSuffix(name, "."))
	label, _, _ := strings.Cut(canonical, ".")
	want := a.SandboxID
	if a.Port != 0 {
		want = strconv.Itoa(a.Port) + "-" + a.SandboxID
	}
	if label != want {
		return fmt.Errorf("%w: %s is not the canonical spelling (%s)", caddytls.ErrPermissionDenied, name, want)
	}
	sb, err := p.sandboxes.Get(ctx, a.SandboxID)
	if err != nil || sb == nil {
		return fmt.Errorf("%w: no sandbox %s", caddytls.ErrPermissionDenied, a.SandboxID)
	}
	if a.Port != 0 && !declaresPort(p.sandboxes, sb.Profile, a.Port) {
		return fmt.Errorf("%w: sandbox %s's profile declares no port %d", caddytls.ErrPermissionDenied, a.SandboxID, a.Port)
	}
	if !p.limit.allow(a.SandboxID, canonical, time.Now()) {
		return fmt.Errorf("%w: sandbox %s has had too many certificate names approved recently", caddytls.ErrPermissionDenied, a.SandboxID)
	}
	return nil
}

// declaresPort reports whether the profile routes or runs a service on port.
func declaresPort(m sandboxNames, profile string, port int) bool {
	prof, ok := m.Profile(profile)
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

// UnmarshalCaddyfile reads
//
//	permission sandbox <base_domain>... {
//	    base_domains <base_domain>...
//	    cert_burst    <n>         # new names approved at once per sandbox (8)
//	    cert_interval <duration>  # one more new name per interval (1m)
//	}
func (p *SandboxPermission) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module name
	p.BaseDomains = append(p.BaseDomains, d.RemainingArgs()...)
	for d.NextBlock(0) {
		switch d.Val() {
		case "base_domains":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			p.BaseDomains = append(p.BaseDomains, args...)
		case "cert_burst":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("cert_burst %q: not a positive number", v)
			}
			p.CertBurst = n
		case "cert_interval":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("cert_interval %q: not a positive duration", v)
			}
			p.CertInterval = caddy.Duration(dur)
		default:
			return d.Errf("unknown sandbox permission option %q", d.Val())
		}
	}
	if len(p.BaseDomains) == 0 {
		return d.Err("permission sandbox needs at least one base domain")
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*SandboxPermission)(nil)
	_ caddytls.OnDemandPermission = (*SandboxPermission)(nil)
	_ caddyfile.Unmarshaler       = (*SandboxPermission)(nil)
)
