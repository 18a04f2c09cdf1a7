package caddymodule

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap/exp/zapslog"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/egress"
)

func init() {
	caddy.RegisterModule(new(SandboxEgress))
	httpcaddyfile.RegisterHandlerDirective("sandbox_egress", parseSandboxEgress)
	// Before respond, so a catch-all respond on the proxy's site cannot answer the sandboxes' requests.
	httpcaddyfile.RegisterDirectiveOrder("sandbox_egress", httpcaddyfile.Before, "respond")
	caddy.RegisterModule(new(EgressConnLimit))
}

// SandboxEgress is the allow-list forward proxy for sandboxes (routes/egress). Serve it on a site the sandboxes
// reach (the internal network's gateway address) and point their HTTP(S)_PROXY at it with the profile's
// `egress { proxy ... }`. The sandbox is identified by its source address on the sandbox network; its profile's
// `egress.allow` list decides.
type SandboxEgress struct {
	// DialTimeout bounds connecting upstream; default 10s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// MaxTunnels caps one sandbox's concurrent tunnels and forwarded requests; default 128. Over it: 429.
	MaxTunnels int `json:"max_tunnels,omitempty"`
	// IdleTimeout closes a tunnel that moved no byte either way for this long; default 5m.
	IdleTimeout caddy.Duration `json:"idle_timeout,omitempty"`

	proxy *egress.Proxy
}

// CaddyModule returns the Caddy module information.
func (*SandboxEgress) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_egress", New: func() caddy.Module { return new(SandboxEgress) }}
}

// Provision links the proxy to the sandbox Manager.
func (h *SandboxEgress) Provision(ctx caddy.Context) error {
	app, err := sandboxesApp(ctx)
	if err != nil {
		return fmt.Errorf("sandbox_egress: %w", err)
	}
	h.proxy = &egress.Proxy{
		Directory:   egress.SandboxDirectory(app.Manager()),
		Logger:      slog.New(zapslog.NewHandler(ctx.Logger().Core())),
		DialTimeout: time.Duration(h.DialTimeout),
		MaxTunnels:  h.MaxTunnels,
		IdleTimeout: time.Duration(h.IdleTimeout),
	}
	return nil
}

func (h *SandboxEgress) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h.proxy.ServeHTTP(w, r)
	return nil
}

// parseSandboxEgress reads
//
//	sandbox_egress [<matcher>] {
//	    dial_timeout <duration>
//	    max_tunnels <n>
//	    idle_timeout <duration>
//	}
func parseSandboxEgress(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(SandboxEgress)
	return m, m.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile reads the directive.
func (h *SandboxEgress) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return opt.Block{
		"dial_timeout": opt.PositiveDuration("dial_timeout", &h.DialTimeout),
		"idle_timeout": opt.PositiveDuration("idle_timeout", &h.IdleTimeout),
		"max_tunnels":  opt.PositiveInt("max_tunnels", &h.MaxTunnels),
	}.Parse(d, "sandbox_egress: unknown option %q")
}

// EgressConnLimit caps the connections one source address (one sandbox) holds open on the egress proxy's server,
// request heads still arriving included (routes/egress.LimitSources). Put it in the listener_wrappers of the server
// that serves sandbox_egress:
//
//	servers :3128 {
//	    listener_wrappers {
//	        sandbox_egress_limit {
//	            max_conns_per_source <n>
//	        }
//	    }
//	}
type EgressConnLimit struct {
	// MaxConnsPerSource is the cap; default 256 (egress.DefaultMaxConnsPerSource).
	MaxConnsPerSource int `json:"max_conns_per_source,omitempty"`

	log *slog.Logger
}

// CaddyModule returns the Caddy module information.
func (*EgressConnLimit) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.listeners.sandbox_egress_limit", New: func() caddy.Module { return new(EgressConnLimit) }}
}

// Provision sets up the logger.
func (l *EgressConnLimit) Provision(ctx caddy.Context) error {
	l.log = slog.New(zapslog.NewHandler(ctx.Logger().Core()))
	return nil
}

// WrapListener applies the cap.
func (l *EgressConnLimit) WrapListener(ln net.Listener) net.Listener {
	return egress.LimitSources(ln, l.MaxConnsPerSource, l.log)
}

// UnmarshalCaddyfile reads `sandbox_egress_limit { max_conns_per_source <n> }`.
func (l *EgressConnLimit) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return opt.Block{"max_conns_per_source": opt.PositiveInt("max_conns_per_source", &l.MaxConnsPerSource)}.
		Parse(d, "sandbox_egress_limit: unknown option %q")
}

var (
	_ caddy.Provisioner           = (*SandboxEgress)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxEgress)(nil)
	_ caddyfile.Unmarshaler       = (*SandboxEgress)(nil)
	_ caddy.Provisioner           = (*EgressConnLimit)(nil)
	_ caddy.ListenerWrapper       = (*EgressConnLimit)(nil)
	_ caddyfile.Unmarshaler       = (*EgressConnLimit)(nil)
)
