package caddymodule

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap/exp/zapslog"

	"github.com/sandgate/sandgate/routes/egress"
)

func init() {
	caddy.RegisterModule(new(SandboxEgress))
	httpcaddyfile.RegisterHandlerDirective("sandbox_egress", parseSandboxEgress)
	// Before respond, so a catch-all respond on the proxy's site cannot answer the sandboxes' requests.
	httpcaddyfile.RegisterDirectiveOrder("sandbox_egress", httpcaddyfile.Before, "respond")
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
	for d.NextBlock(0) {
		switch d.Val() {
		case "dial_timeout", "idle_timeout":
			opt := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("%s: want a positive duration, got %q", opt, d.Val())
			}
			if opt == "dial_timeout" {
				h.DialTimeout = caddy.Duration(dur)
			} else {
				h.IdleTimeout = caddy.Duration(dur)
			}
		case "max_tunnels":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n < 1 {
				return d.Errf("max_tunnels: want a positive number, got %q", d.Val())
			}
			h.MaxTunnels = n
		default:
			return d.Errf("sandbox_egress: unknown option %q", d.Val())
		}
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*SandboxEgress)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxEgress)(nil)
	_ caddyfile.Unmarshaler       = (*SandboxEgress)(nil)
)
