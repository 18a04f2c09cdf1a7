package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/fastgpt"
)

func init() {
	caddy.RegisterModule(new(FastGPTProxy))
	httpcaddyfile.RegisterHandlerDirective("fastgpt_proxy", parseFastGPTProxy)
	// A handler that answers its own paths and passes the rest on: it runs before respond, so a site can end with
	// a catch-all `respond 404` without an `order` line.
	httpcaddyfile.RegisterDirectiveOrder("fastgpt_proxy", httpcaddyfile.Before, "respond")
}

// FastGPTProxy is a drop-in for FastGPT's fastgpt-agent-sandbox-proxy: /health, the /fs and /terminal WebSockets
// and /preview/{sandbox_id}/{session_id}/{path}. Other paths go to the next handler. Every option accepts
// placeholders and defaults to the original's environment variable.
type FastGPTProxy struct {
	// Secret is the ticket key and X-Proxy-Token, at least 32 bytes. Default {env.AGENT_SANDBOX_PROXY_SECRET}.
	Secret string `json:"secret,omitempty"`
	// AppURL is the FastGPT main service. Default {env.FASTGPT_APP_URL}, then http://localhost:3000.
	AppURL string `json:"app_url,omitempty"`
	// RequestTimeout bounds verifyTicket and keepalive calls: a duration or whole seconds. Default
	// {env.FASTGPT_APP_REQUEST_TIMEOUT_SECS}, then 10 s.
	RequestTimeout string `json:"request_timeout,omitempty"`
	// RewriteHost replaces a loopback host in sandbox URLs. Default {env.AGENT_SANDBOX_PROXY_REWRITE_HOST}.
	RewriteHost string `json:"rewrite_host,omitempty"`
	// AddressCacheTTL is how long a resolved preview session is reused: a duration or whole seconds. Default
	// {env.AGENT_SANDBOX_PROXY_ADDRESS_CACHE_TTL_SECS}, then 30 s.
	AddressCacheTTL string `json:"address_cache_ttl,omitempty"`
	// Serve is ws (/health, /fs, /terminal), preview (/health, /preview/...) or all (default).
	Serve string `json:"serve,omitempty"`

	proxy *fastgpt.Proxy
}

// CaddyModule returns the Caddy module information.
func (*FastGPTProxy) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.fastgpt_proxy", New: func() caddy.Module { return new(FastGPTProxy) }}
}

// Provision resolves placeholders and builds the proxy. It does no I/O; a secret under 32 bytes fails the config,
// as the original refuses to start.
func (h *FastGPTProxy) Provision(ctx caddy.Context) error {
	repl := caddy.NewReplacer()
	settings := fastgpt.Settings{Secret: h.Secret, AppURL: h.AppURL, RequestTimeout: h.RequestTimeout,
		RewriteHost: h.RewriteHost, AddressCacheTTL: h.AddressCacheTTL, Serve: h.Serve}
	cfg, err := settings.Config(func(s string) string { return repl.ReplaceAll(s, "") }, caddy.ParseDuration, ctx.Slogger())
	if err == nil {
		h.proxy, err = fastgpt.New(cfg)
	}
	if err != nil {
		return fmt.Errorf("fastgpt_proxy: %w", err)
	}
	return nil
}

// ServeHTTP serves the proxy's paths and passes every other request to next.
func (h *FastGPTProxy) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !h.proxy.Handles(r) {
		return next.ServeHTTP(w, r)
	}
	h.proxy.ServeHTTP(w, r)
	return nil
}

// Cleanup closes the open relays with close frames (on reload and stop), as reverse_proxy does with its
// WebSockets.
func (h *FastGPTProxy) Cleanup() error {
	if h.proxy == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.proxy.Close(ctx)
}

// UnmarshalCaddyfile reads
//
//	fastgpt_proxy [<matcher>] {
//	    secret            <secret>
//	    app_url           <url>
//	    request_timeout   <duration|seconds>
//	    rewrite_host      <host>
//	    address_cache_ttl <duration|seconds>
//	    serve             ws|preview|all
//	}
func (h *FastGPTProxy) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if err := opt.NoArgs(d); err != nil {
		return err
	}
	// checked reads an option that parse checks unless it holds a placeholder (resolved at Provision).
	checked := func(name string, dst *string, parse func(string) error) opt.Option {
		return opt.Arg(func(v string) error {
			*dst = v
			if err := parse(v); err != nil && !strings.Contains(v, "{") {
				return fmt.Errorf("%s: %v", name, err)
			}
			return nil
		})
	}
	seconds := func(v string) error { _, err := fastgpt.ParseSeconds(v, caddy.ParseDuration); return err }
	return opt.Block{
		"secret":            opt.String(&h.Secret),
		"app_url":           opt.String(&h.AppURL),
		"rewrite_host":      opt.String(&h.RewriteHost),
		"request_timeout":   checked("request_timeout", &h.RequestTimeout, seconds),
		"address_cache_ttl": checked("address_cache_ttl", &h.AddressCacheTTL, seconds),
		"serve":             checked("serve", &h.Serve, func(v string) error { _, err := fastgpt.ParseRoutes(v); return err }),
	}.Parse(d, "unknown fastgpt_proxy option %q")
}

func parseFastGPTProxy(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(FastGPTProxy)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*FastGPTProxy)(nil)
	_ caddy.CleanerUpper          = (*FastGPTProxy)(nil)
	_ caddyhttp.MiddlewareHandler = (*FastGPTProxy)(nil)
	_ caddyfile.Unmarshaler       = (*FastGPTProxy)(nil)
)
