package caddymodule

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/hostrewrite"
	"github.com/sandgate/sandgate/routes/sandboxroute"
)

func init() {
	caddy.RegisterModule(new(SandboxUpstreams))
}

// SandboxUpstreams is the `http.reverse_proxy.upstreams.sandbox` dynamic upstream source: the sandbox named by
// {http.vars.sandbox_id} -> its agent's address, from the Manager's memory (no I/O, no per-sandbox config).
type SandboxUpstreams struct {
	// RewriteHost replaces a loopback agent host (localhost, 127.0.0.1, ::1) with this host, keeping the port: set
	// it (e.g. host.docker.internal) when the gateway runs in a container and sandboxes publish ports on the host.
	RewriteHost string `json:"rewrite_host,omitempty"`

	resolver sandboxroute.Resolver
}

// CaddyModule returns the Caddy module information.
func (*SandboxUpstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.upstreams.sandbox", New: func() caddy.Module { return new(SandboxUpstreams) }}
}

// Provision links the source to the sandbox Manager.
func (u *SandboxUpstreams) Provision(ctx caddy.Context) error {
	app, err := sandboxesApp(ctx)
	if err != nil {
		return fmt.Errorf("sandbox upstreams: %w", err)
	}
	mgr := app.Manager()
	u.resolver = mgr
	u.RewriteHost = caddy.NewReplacer().ReplaceKnown(u.RewriteHost, "")
	return nil
}

// GetUpstreams returns the agent of the request's sandbox.
func (u *SandboxUpstreams) GetUpstreams(r *http.Request) ([]*reverseproxy.Upstream, error) {
	id, _ := caddyhttp.GetVar(r.Context(), varSandboxID).(string)
	if id == "" {
		return nil, fmt.Errorf("no {http.vars.%s}: put sandbox_ticket before the proxy", varSandboxID)
	}
	t, ok := u.resolver.Resolve(id)
	if !ok || t.Addr == "" {
		return nil, fmt.Errorf("sandbox %s is not running", id)
	}
	return []*reverseproxy.Upstream{{Dial: hostrewrite.Addr(t.Addr, u.RewriteHost)}}, nil
}

// UnmarshalCaddyfile reads
//
//	dynamic sandbox {
//	    rewrite_host <host>
//	}
func (u *SandboxUpstreams) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the source name
	if d.NextArg() {
		return d.ArgErr()
	}
	return opt.Block{"rewrite_host": opt.String(&u.RewriteHost)}.Parse(d, "unknown sandbox upstreams option %q")
}

var (
	_ caddy.Provisioner           = (*SandboxUpstreams)(nil)
	_ reverseproxy.UpstreamSource = (*SandboxUpstreams)(nil)
	_ caddyfile.Unmarshaler       = (*SandboxUpstreams)(nil)
)
