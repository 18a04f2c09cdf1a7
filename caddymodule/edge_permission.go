package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes/service"
)

func init() {
	caddy.RegisterModule(new(SandboxPermission))
}

// SandboxPermission is the `tls.permission.sandbox` on-demand TLS permission: it adapts sandboxroute.CertPolicy
// (canonical names of live sandboxes, declared or listening ports, a budget of new names per sandbox) to Caddy.
type SandboxPermission struct {
	BaseDomains []string `json:"base_domains"`
	// CertBurst and CertInterval rate-limit new names per sandbox; 0 means 8 and 1m.
	CertBurst    int            `json:"cert_burst,omitempty"`
	CertInterval caddy.Duration `json:"cert_interval,omitempty"`
	// PortsCache is how long one listing of a sandbox's listening ports answers every name of it; 0 means 5s.
	PortsCache caddy.Duration `json:"ports_cache,omitempty"`

	policy *sandboxroute.CertPolicy
	agents *http.Client
}

// CaddyModule returns the Caddy module information.
func (*SandboxPermission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.permission.sandbox", New: func() caddy.Module { return new(SandboxPermission) }}
}

// Provision links the permission to the sandbox Manager and to the agents, which list their listening ports.
func (p *SandboxPermission) Provision(ctx caddy.Context) error {
	app, err := sandboxesApp(ctx)
	if err != nil {
		return fmt.Errorf("tls.permission.sandbox: %w", err)
	}
	mgr := app.Manager()
	p.agents = service.NewAgentClient(nil).HTTPClient()
	p.policy, err = sandboxroute.NewCertPolicy(sandboxroute.CertPolicyConfig{
		BaseDomains: p.BaseDomains,
		Sandboxes:   mgr,
		Ports:       sandboxroute.AgentPorts{HTTP: p.agents},
		PortsTTL:    time.Duration(p.PortsCache),
		Burst:       p.CertBurst,
		Interval:    time.Duration(p.CertInterval),
	})
	if err != nil {
		return fmt.Errorf("tls.permission.sandbox: %w", err)
	}
	return nil
}

// Cleanup closes the idle agent connections this config's permission opened.
func (p *SandboxPermission) Cleanup() error {
	if p.agents != nil {
		p.agents.CloseIdleConnections()
	}
	return nil
}

// CertificateAllowed allows the canonical names of live sandboxes only, within the sandbox's issuance budget.
func (p *SandboxPermission) CertificateAllowed(ctx context.Context, name string) error {
	if err := p.policy.Allowed(ctx, name); err != nil {
		return fmt.Errorf("%w: %w", caddytls.ErrPermissionDenied, err)
	}
	return nil
}

// UnmarshalCaddyfile reads
//
//	permission sandbox <base_domain>... {
//	    base_domains <base_domain>...
//	    cert_burst    <n>         # new names approved at once per sandbox (8)
//	    cert_interval <duration>  # one more new name per interval (1m)
//	    ports_cache   <duration>  # how long a sandbox's listening ports are remembered (5s)
//	}
func (p *SandboxPermission) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module name
	p.BaseDomains = append(p.BaseDomains, d.RemainingArgs()...)
	err := opt.Block{
		"base_domains":  opt.List(&p.BaseDomains),
		"cert_burst":    opt.PositiveInt("cert_burst", &p.CertBurst),            // new names approved at once per sandbox (8)
		"cert_interval": opt.PositiveDuration("cert_interval", &p.CertInterval), // one more new name per interval (1m)
		"ports_cache":   opt.PositiveDuration("ports_cache", &p.PortsCache),     // how long a sandbox's listening ports are remembered (5s)
	}.Parse(d, "unknown sandbox permission option %q")
	if err != nil {
		return err
	}
	if len(p.BaseDomains) == 0 {
		return d.Err("permission sandbox needs at least one base domain")
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*SandboxPermission)(nil)
	_ caddy.CleanerUpper          = (*SandboxPermission)(nil)
	_ caddytls.OnDemandPermission = (*SandboxPermission)(nil)
	_ caddyfile.Unmarshaler       = (*SandboxPermission)(nil)
)
