package caddymodule

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/hostrewrite"
	"github.com/sandgate/sandgate/routes/sandboxroute"
)

func init() {
	caddy.RegisterModule(new(SandboxRoute))
	caddy.RegisterModule(new(SandboxUpstreams))
}

// SandboxRoute is the `http.handlers.sandbox_route` handler that `sandbox_proxy` puts in front of its
// reverse_proxy. For a request sandbox_ticket admitted, it starts the sandbox if it is idle (bounded wait; a dead
// one gets a typed container_died error), holds a lease on it until the request or stream ends, rewrites the URI to
// the agent's path for the route kind (keeping the client's escaping) and exposes the agent token to the proxy as
// {http.vars.sandbox_agent_token}.
type SandboxRoute struct {
	// Kind is the route kind: app, vnc, terminal, cdp, pty or files.
	Kind string `json:"kind"`
	// Port fixes the app port when the URL names none (before the profile's app_port).
	Port int `json:"port,omitempty"`
	// StartTimeout bounds the wait for an idle sandbox to start; 0 means 60s.
	StartTimeout caddy.Duration `json:"start_timeout,omitempty"`
	// SharedOrigin is the operator's opt-in to serve apps on a site that also serves the console (see checkOrigins).
	SharedOrigin bool `json:"shared_origin,omitempty"`

	route  *sandboxroute.Route
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*SandboxRoute) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_route", New: func() caddy.Module { return new(SandboxRoute) }}
}

// Provision links the route to the sandbox Manager.
func (h *SandboxRoute) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	app, err := sandboxesApp(ctx)
	if err == nil {
		h.route, err = sandboxroute.NewRoute(app.Manager(), h.Kind, h.Port, time.Duration(h.StartTimeout))
	}
	if err != nil {
		return fmt.Errorf("sandbox_route: %w", err)
	}
	return nil
}

func (h *SandboxRoute) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	addr, ok := caddyhttp.GetVar(r.Context(), varAddress).(sandboxroute.Address)
	if !ok {
		// Without sandbox_ticket in front nothing says which sandbox this is, and nothing authenticated it.
		return caddyhttp.Error(http.StatusInternalServerError,
			errors.New("sandbox_proxy needs sandbox_ticket to run before it in the same route"))
	}
	p, err := h.route.Prepare(r.Context(), addr, r.URL.RawQuery)
	if err != nil {
		if c := h.logger.Check(zap.InfoLevel, "sandbox route failed"); c != nil {
			c.Write(zap.String("sandbox", addr.SandboxID), zap.String("kind", string(addr.Kind)), zap.Error(err))
		}
		sandboxroute.WriteLifecycleError(w, err, requestID(repl))
		return nil
	}
	defer p.Release()
	// Before Apply rewrites the query for the agent, and before the proxy adds the sandbox's headers.
	sandboxroute.SetContentHeaders(w.Header(), addr, r.URL.Query().Get("path"))
	if err := p.Agent.Apply(r); err != nil {
		return caddyhttp.Error(http.StatusBadRequest, err)
	}
	caddyhttp.SetVar(r.Context(), varAgentToken, p.Target.Token)
	// In path form the sandbox answers on the gateway's origin: it may not set cookies or widen service workers
	// there (sandboxroute.StrippedAnswerHeaders). Wrapped after the gate set its own session cookie.
	return next.ServeHTTP(sandboxroute.GuardAnswer(w, addr), r)
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
	_ caddy.Provisioner           = (*SandboxRoute)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxRoute)(nil)
	_ caddy.Provisioner           = (*SandboxUpstreams)(nil)
	_ reverseproxy.UpstreamSource = (*SandboxUpstreams)(nil)
	_ caddyfile.Unmarshaler       = (*SandboxUpstreams)(nil)
)

// checkOrigins holds the provisioned http app to the origin rule (sandboxroute.OriginRule), so JSON configs are held
// to it too: a site is the set of a server's top-level routes with the same host matchers, which is what a
// Caddyfile site block adapts to.
func checkOrigins(app *caddyhttp.App) error {
	if app == nil {
		return nil
	}
	for _, srvName := range slices.Sorted(maps.Keys(app.Servers)) {
		var rule sandboxroute.OriginRule
		for _, r := range app.Servers[srvName].Routes {
			var console, apps bool
			walkHandlers(r.Handlers, &console, &apps)
			rule.Serves(fmt.Sprintf("server %s, site %s", srvName, hostKey(r.MatcherSets)), console, apps)
		}
		if err := rule.Err(); err != nil {
			return err
		}
	}
	return nil
}

// hostKey names the hosts a top-level route is for; "every host" for a route without a host matcher.
func hostKey(sets caddyhttp.MatcherSets) string {
	var hosts []string
	for _, set := range sets {
		for _, m := range set {
			switch h := m.(type) {
			case caddyhttp.MatchHost:
				hosts = append(hosts, h...)
			case *caddyhttp.MatchHost:
				hosts = append(hosts, (*h)...)
			}
		}
	}
	if len(hosts) == 0 {
		return "every host"
	}
	slices.Sort(hosts)
	return strings.Join(hosts, ",")
}

// walkHandlers records whether handlers serve the console or sandbox apps (without shared_origin), through subroutes.
func walkHandlers(hs []caddyhttp.MiddlewareHandler, console, apps *bool) {
	for _, h := range hs {
		switch h := h.(type) {
		case *Pages:
			*console = *console || h.APIKeys || len(h.ConsoleKeys) > 0
		case *SandboxRoute:
			*apps = *apps || h.Kind == "app" && !h.SharedOrigin
		case *caddyhttp.Subroute:
			for _, r := range h.Routes {
				walkHandlers(r.Handlers, console, apps)
			}
		}
	}
}
