package caddymodule

import (
	"log/slog"
	"net"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap/exp/zapslog"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/egress"
)

func init() { caddy.RegisterModule(new(EgressConnLimit)) }

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
	_ caddy.Provisioner     = (*EgressConnLimit)(nil)
	_ caddy.ListenerWrapper = (*EgressConnLimit)(nil)
	_ caddyfile.Unmarshaler = (*EgressConnLimit)(nil)
)
