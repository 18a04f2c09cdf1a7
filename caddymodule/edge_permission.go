package caddymodule

import (
	"context"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/sandgate/sandgate/routes/sandboxroute"
)

func init() {
	caddy.RegisterModule(new(SandboxPermission))
}

// SandboxPermission is the `tls.permission.sandbox` on-demand TLS permission: a certificate may be obtained only
// for {id}.{base} or {port}-{id}.{base} under a configured base domain, and only while that sandbox exists. Any
// other name (random SNI, other domains, dead sandboxes) is refused before an ACME order is placed.
type SandboxPermission struct {
	BaseDomains []string `json:"base_domains"`

	registry sandboxroute.Registry
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
	p.registry = mgr
	return nil
}

// CertificateAllowed allows names of live sandboxes only.
func (p *SandboxPermission) CertificateAllowed(_ context.Context, name string) error {
	a, ok := sandboxroute.ParseHost(name, p.BaseDomains)
	if !ok {
		return fmt.Errorf("%w: %s is not a sandbox name under %s", caddytls.ErrPermissionDenied, name, strings.Join(p.BaseDomains, ", "))
	}
	if !p.registry.Exists(a.SandboxID) {
		return fmt.Errorf("%w: no sandbox %s", caddytls.ErrPermissionDenied, a.SandboxID)
	}
	return nil
}

// UnmarshalCaddyfile reads
//
//	permission sandbox <base_domain>... {
//	    base_domains <base_domain>...
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
