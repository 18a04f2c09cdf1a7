package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/tickets"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("sandbox_ticket", parseSandboxTicket)
	httpcaddyfile.RegisterDirectiveOrder("sandbox_ticket", httpcaddyfile.Before, "basic_auth")
	httpcaddyfile.RegisterDirective("sandbox_proxy", parseSandboxProxy)
	// Before respond (and so before reverse_proxy and file_server): a site that ends with a catch-all `respond`
	// or serves files must not swallow the terminal, desktop, app and CDP routes.
	httpcaddyfile.RegisterDirectiveOrder("sandbox_proxy", httpcaddyfile.Before, "respond")
}

// Stream defaults of sandbox_proxy. A reload keeps open WebSockets for stream_close_delay (the old proxy closes them
// only then), so an open terminal or CDP session survives a config change; stream_timeout caps a stream's life.
const (
	defaultStreamCloseDelay = time.Hour
	defaultStreamTimeout    = 24 * time.Hour
)

// parseSandboxTicket reads `sandbox_ticket [<matcher>] [<kind>] { ... }`, one row per option.
func parseSandboxTicket(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	t := new(SandboxTicket)
	h.Next() // the directive name
	if h.NextArg() {
		if _, err := tickets.ParseKind(h.Val()); err != nil {
			return nil, h.Err(err.Error())
		}
		t.Kind = h.Val()
		if h.NextArg() {
			return nil, h.ArgErr()
		}
	}
	return t, opt.Block{
		"secret":       opt.String(&t.Secret),                           // default {env.SANDGATE_TICKET_SECRET}
		"base_domains": opt.List(&t.BaseDomains),                        // enable {port}-{id}.<domain> and {id}.<domain>
		"session":      opt.DurationOrOff("session", &t.Session),        // session cookie lifetime, default 10m
		"leeway":       opt.NonNegativeDuration("leeway", &t.Leeway),    // default 5s
		"replay_cache": opt.PositiveInt("replay_cache", &t.ReplayCache), // live spent tickets kept per subject, default 100000
		"replay_redis": redisOption(&t.ReplayRedis),                     // spent tickets in the fleet's Redis (redis.go), not in memory
		"api_keys":     opt.FlagArg(&t.APIKeys, &t.APIDataDir),          // [<api data dir>]: sandbox_api's keys open the mcp route of their owner's sandboxes
	}.Parse(h.Dispenser, "unknown sandbox_ticket option %q")
}

// proxyOptions are sandbox_proxy's own subdirectives; everything else in its block goes to reverse_proxy.
type proxyOptions struct {
	kinds             []tickets.Kind
	port              int
	startTimeout      caddy.Duration
	rewriteHost       string
	maxMessage        int64
	allowBrowserClose bool
	// sharedOrigin is the operator's explicit opt-in to serve sandbox apps on a site that also serves the console.
	sharedOrigin bool
}

// parseSandboxProxy expands
//
//	sandbox_proxy [<matcher>] [app|vnc|terminal|cdp|pty|files|mcp|port <N>] {
//	    start_timeout <duration>    # wait for an idle sandbox to start, default 60s
//	    rewrite_host  <host>        # replace a loopback agent host (gateway in a container)
//	    max_message   <size>        # WebSocket message limit the agent enforces with close 1009
//	    allow_browser_close         # cdp: let clients send Browser.close (filtered by default)
//	    <any reverse_proxy subdirective>
//	}
//
// into a route of sandbox_route (start, lease, agent path) and reverse_proxy with the `sandbox` dynamic upstream,
// streaming settings (flush_interval -1, stream_close_delay 1h, stream_timeout 24h) and the kind's header rules.
// Without a kind it serves every kind, each with its rules, chosen by {http.vars.sandbox_kind}.
func parseSandboxProxy(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	userMatcherSet, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	h.Next() // ExtractMatcherSet rewound to before the directive name
	d := h.NewFromNextSegment()
	opts, err := readProxyOptions(d)
	if err != nil {
		return nil, err
	}

	var routes caddyhttp.RouteList
	for _, kind := range opts.kinds {
		handlers, err := proxyHandlers(h, d, kind, opts)
		if err != nil {
			return nil, err
		}
		r := caddyhttp.Route{HandlersRaw: handlers}
		if len(opts.kinds) > 1 {
			r.MatcherSetsRaw = []caddy.ModuleMap{{
				"vars": caddyconfig.JSON(caddyhttp.VarsMatcher{"{http.vars." + varKind + "}": []string{string(kind)}}, nil),
			}}
		}
		routes = append(routes, r)
	}

	var out caddyhttp.Route
	if len(routes) == 1 {
		out = routes[0]
	} else {
		out.HandlersRaw = []json.RawMessage{caddyconfig.JSONModuleObject(caddyhttp.Subroute{Routes: routes}, "handler", "subroute", nil)}
	}
	if userMatcherSet != nil {
		out.MatcherSetsRaw = []caddy.ModuleMap{userMatcherSet}
	}
	return []httpcaddyfile.ConfigValue{{Class: "route", Value: out}}, nil
}

// readProxyOptions reads the kind argument and sandbox_proxy's own subdirectives, deleting their tokens so that the
// reverse_proxy unmarshaler sees only its own.
func readProxyOptions(d *caddyfile.Dispenser) (proxyOptions, error) {
	var opts proxyOptions
	d.Next() // the directive name
	args := d.RemainingArgs()
	var err error
	if opts.kinds, opts.port, err = sandboxroute.ProxyKinds(args); err != nil {
		return opts, d.Err(err.Error())
	}
	d.DeleteN(len(args))

	maxMessage := opt.Arg(func(v string) error {
		n, err := sandboxes.ParseBytes(v)
		if err != nil || n < 1 {
			return fmt.Errorf("max_message must be a positive size, not %q", v)
		}
		opts.maxMessage = n
		return nil
	})
	own := opt.Block{
		"start_timeout":       opt.PositiveDuration("start_timeout", &opts.startTimeout),
		"rewrite_host":        opt.String(&opts.rewriteHost),
		"max_message":         maxMessage,
		"allow_browser_close": opt.Flag(&opts.allowBrowserClose),
		"shared_origin":       opt.Flag(&opts.sharedOrigin),
	}
	for d.NextBlock(0) {
		read, ok := own[d.Val()]
		if !ok || d.Nesting() != 1 {
			continue
		}
		n := 1 + d.CountRemainingArgs()
		if err := read(d); err != nil {
			return opts, err
		}
		d.DeleteN(n)
	}
	d.Reset()
	return opts, nil
}

// proxyHandlers builds sandbox_route + reverse_proxy for one kind.
func proxyHandlers(h httpcaddyfile.Helper, d *caddyfile.Dispenser, kind tickets.Kind, opts proxyOptions) ([]json.RawMessage, error) {
	route := &SandboxRoute{Kind: string(kind), Port: opts.port, StartTimeout: opts.startTimeout,
		SharedOrigin: opts.sharedOrigin && kind == tickets.KindApp}

	set := sandboxroute.ProxyHeaders(kind, sandboxroute.ProxyValues{Token: "{http.vars." + varAgentToken + "}",
		Permission: "{http.vars." + varPermission + "}", Prefix: "{http.vars." + varPrefix + "}",
		AllowBrowserClose: opts.allowBrowserClose, MaxMessage: opts.maxMessage})
	rp := streamingProxy(&SandboxUpstreams{RewriteHost: opts.rewriteHost}, set)
	d.Reset()
	if err := rp.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	if err := rp.FinalizeUnmarshalCaddyfile(h); err != nil {
		return nil, err
	}
	if len(rp.Upstreams) > 0 {
		return nil, d.Err("sandbox_proxy chooses the upstream itself; do not name one")
	}
	return []json.RawMessage{
		caddyconfig.JSONModuleObject(route, "handler", "sandbox_route", nil),
		caddyconfig.JSONModuleObject(rp, "handler", "reverse_proxy", nil),
	}, nil
}

// streamingProxy is a reverse_proxy to the agent: the `sandbox` dynamic upstream, set on the request's headers,
// streams flushed at once and kept across reloads (the stream defaults above).
func streamingProxy(upstreams *SandboxUpstreams, set http.Header) *reverseproxy.Handler {
	return &reverseproxy.Handler{
		DynamicUpstreamsRaw: caddyconfig.JSONModuleObject(upstreams, "source", "sandbox", nil),
		Headers:             &headers.Handler{Request: &headers.HeaderOps{Set: set}},
		FlushInterval:       -1,
		StreamCloseDelay:    caddy.Duration(defaultStreamCloseDelay),
		StreamTimeout:       caddy.Duration(defaultStreamTimeout),
	}
}

// writeProxy is the streamingProxy of a dialect that admits requests itself (OpenSandbox, E2B): the agent token
// its Forward set, and write permission.
func writeProxy(upstreams *SandboxUpstreams) *reverseproxy.Handler {
	return streamingProxy(upstreams, http.Header{
		sandboxroute.GatewayHeaderPrefix + "Token":      []string{"{http.vars." + varAgentToken + "}"},
		sandboxroute.GatewayHeaderPrefix + "Permission": []string{"write"},
	})
}
