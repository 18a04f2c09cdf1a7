package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/e2b"
	"github.com/sandgate/sandgate/sandboxes/service"
)

func init() {
	caddy.RegisterModule(new(SandboxE2B))
	caddy.RegisterModule(new(SandboxE2BEdge))
	httpcaddyfile.RegisterHandlerDirective("sandbox_e2b", parseSandboxE2B)
	// Before respond, and before sandbox_api (whose init runs after this file's, also before respond): the E2B
	// API's prefix is its own.
	httpcaddyfile.RegisterDirectiveOrder("sandbox_e2b", httpcaddyfile.Before, "respond")
	httpcaddyfile.RegisterHandlerDirective("sandbox_e2b_edge", parseSandboxE2BEdge)
	// Before sandbox_ticket (ordered before basic_auth): an E2B sandbox's ports open with E2B's credentials, not
	// with a ticket. Only Caddy's own directives can anchor an order, so this is before try_files.
	httpcaddyfile.RegisterDirectiveOrder("sandbox_e2b_edge", httpcaddyfile.Before, "try_files")
}

// SandboxE2B is the `http.handlers.sandbox_e2b` handler: E2B's control-plane API (routes/e2b) under Prefix, with
// sandbox_api's keys and owners (sent as X-API-Key). Other paths go to the next handler.
type SandboxE2B struct {
	// APIDataDir is the data dir of the sandbox_api whose keys are accepted (default: sandbox_api's default).
	APIDataDir string `json:"api_data_dir,omitempty"`
	// Prefix is the path the API is served under (E2B_API_URL's path), e.g. /e2b; "" serves it at the root.
	Prefix string `json:"prefix,omitempty"`
	// Domain is the sandbox domain create answers name (E2B_DOMAIN, host[:port]).
	Domain string `json:"domain,omitempty"`
	// Templates maps E2B template names onto profile ids.
	Templates map[string]string `json:"templates,omitempty"`
	// MaxTimeout caps a sandbox's timeout; 0: no cap beyond the Manager's.
	MaxTimeout caddy.Duration `json:"max_timeout,omitempty"`

	handler  *e2b.Handler
	prefix   string
	storeKey string
}

// CaddyModule returns the Caddy module information.
func (*SandboxE2B) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_e2b", New: func() caddy.Module { return new(SandboxE2B) }}
}

// e2bService builds the operations over the app's Manager (the lifecycle, pause, snapshots and usage this
// dialect needs; no agent calls: the edge forwards bytes).
func e2bService(ctx caddy.Context) (*service.Service, error) {
	app, err := sandboxesApp(ctx)
	if err != nil {
		return nil, err
	}
	return service.New(service.Config{Sandboxes: app.Manager(), Logger: ctx.Slogger()}), nil
}

// Provision links the dialect to the Manager and to sandbox_api's key ring.
func (h *SandboxE2B) Provision(ctx caddy.Context) error {
	checker, storeKey, err := newAPIKeyChecker(ctx, h.APIDataDir)
	if err != nil {
		return fmt.Errorf("sandbox_e2b: %w", err)
	}
	h.storeKey = storeKey
	repl := caddy.NewReplacer()
	h.prefix = strings.TrimSuffix(h.Prefix, "/")
	h.handler = e2b.New(e2b.Config{
		Service: checker.Service, Keys: checker.Keys, Templates: h.Templates, Domain: repl.ReplaceKnown(h.Domain, ""),
		Prefix: h.prefix, MaxTimeout: time.Duration(h.MaxTimeout), Logger: ctx.Slogger(),
	})
	return nil
}

// Cleanup releases this config's reference to the API's key ring.
func (h *SandboxE2B) Cleanup() error { return releaseKeyRing(h.storeKey) }

// Validate checks the settings.
func (h *SandboxE2B) Validate() error {
	cfg := e2b.Config{Prefix: h.Prefix, Domain: h.Domain, Templates: h.Templates, MaxTimeout: time.Duration(h.MaxTimeout)}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("sandbox_e2b: %w", err)
	}
	return nil
}

func (h *SandboxE2B) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.prefix != "" && r.URL.Path != h.prefix && !strings.HasPrefix(r.URL.Path, h.prefix+"/") {
		return next.ServeHTTP(w, r)
	}
	h.handler.ServeHTTP(w, r)
	return nil
}

// parseSandboxE2B reads `sandbox_e2b { ... }`, one row per option.
func parseSandboxE2B(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := &SandboxE2B{Templates: map[string]string{}}
	h.Next()
	if err := opt.NoArgs(h.Dispenser); err != nil {
		return nil, err
	}
	template := func(d *caddyfile.Dispenser) error { // template <name> <profile>, repeatable
		var name, profile string
		if !d.AllArgs(&name, &profile) {
			return d.ArgErr()
		}
		if _, dup := m.Templates[name]; dup {
			return d.Errf("template %q is named twice", name)
		}
		m.Templates[name] = profile
		return nil
	}
	return m, opt.Block{
		"prefix":       opt.String(&m.Prefix), // E2B_API_URL's path; default the site's root
		"domain":       opt.String(&m.Domain), // E2B_DOMAIN, named in create answers
		"api_data_dir": opt.String(&m.APIDataDir),
		"max_timeout":  opt.PositiveDuration("max_timeout", &m.MaxTimeout),
		"template":     template,
	}.Parse(h.Dispenser, "unknown sandbox_e2b option %q")
}

// SandboxE2BEdge is the `http.handlers.sandbox_e2b_edge` handler: E2B's edge on the content origin
// (routes/e2b.Edge). An admitted request goes to the embedded reverse_proxy with the `sandbox` upstream; a request
// that is not for an E2B sandbox goes to the next handler unchanged.
type SandboxE2BEdge struct {
	// Domains are the sandbox domains (hosts): {port}-{id}.{domain} is routed, {domain} takes E2B's routing headers.
	Domains []string `json:"domains,omitempty"`
	// ProxyRaw is the reverse_proxy that streams admitted requests to the agent (writeProxy: streams flushed at once,
	// kept across reloads; the answer goes back as it is, cookies and worker scopes stripped by sandboxroute.GuardAnswer).
	ProxyRaw json.RawMessage `json:"proxy,omitempty" caddy:"namespace=http.handlers inline_key=handler"`

	edge  *e2b.Edge
	proxy caddyhttp.MiddlewareHandler
}

// CaddyModule returns the Caddy module information.
func (*SandboxE2BEdge) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_e2b_edge", New: func() caddy.Module { return new(SandboxE2BEdge) }}
}

// Provision links the edge to the Manager and loads its proxy.
func (h *SandboxE2BEdge) Provision(ctx caddy.Context) error {
	svc, err := e2bService(ctx)
	if err != nil {
		return fmt.Errorf("sandbox_e2b_edge: %w", err)
	}
	if h.ProxyRaw == nil {
		h.ProxyRaw = caddyconfig.JSONModuleObject(writeProxy(new(SandboxUpstreams)), "handler", "reverse_proxy", nil)
	}
	mod, err := ctx.LoadModule(h, "ProxyRaw")
	if err != nil {
		return fmt.Errorf("sandbox_e2b_edge: loading its proxy: %w", err)
	}
	proxy, ok := mod.(caddyhttp.MiddlewareHandler)
	if !ok {
		return fmt.Errorf("sandbox_e2b_edge: its proxy is a %T, not an HTTP handler", mod)
	}
	h.proxy = proxy
	repl := caddy.NewReplacer()
	domains := make([]string, 0, len(h.Domains))
	for _, d := range h.Domains {
		domains = append(domains, repl.ReplaceKnown(d, ""))
	}
	h.edge = e2b.NewEdge(e2b.EdgeConfig{Service: svc, Domains: domains, Logger: ctx.Slogger()})
	return nil
}

// Validate checks the settings.
func (h *SandboxE2BEdge) Validate() error {
	if len(h.Domains) == 0 {
		return errors.New("sandbox_e2b_edge: name the sandbox domain (domain sandbox.localhost)")
	}
	return nil
}

func (h *SandboxE2BEdge) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	fwd := &varsForwarder{serve: func(w http.ResponseWriter, r *http.Request) error { return h.proxy.ServeHTTP(w, r, next) }}
	if !h.edge.Serve(w, r, fwd) {
		return next.ServeHTTP(w, r)
	}
	return fwd.err
}

// parseSandboxE2BEdge reads
//
//	sandbox_e2b_edge {
//	    domain       <domain>...   # sandbox domains (hosts), e.g. sandbox.localhost
//	    rewrite_host <host>        # as sandbox_proxy's
//	}
func parseSandboxE2BEdge(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(SandboxE2BEdge)
	upstreams := new(SandboxUpstreams)
	h.Next()
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	err := opt.Block{"domain": opt.List(&m.Domains), "rewrite_host": opt.String(&upstreams.RewriteHost)}.
		Parse(h.Dispenser, "unknown sandbox_e2b_edge option %q")
	if err != nil {
		return nil, err
	}
	m.ProxyRaw = caddyconfig.JSONModuleObject(writeProxy(upstreams), "handler", "reverse_proxy", nil)
	return m, nil
}

var (
	_ caddy.Provisioner           = (*SandboxE2B)(nil)
	_ caddy.CleanerUpper          = (*SandboxE2B)(nil)
	_ caddy.Validator             = (*SandboxE2B)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxE2B)(nil)
	_ caddy.Provisioner           = (*SandboxE2BEdge)(nil)
	_ caddy.Validator             = (*SandboxE2BEdge)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxE2BEdge)(nil)
	_ e2b.Forwarder               = (*varsForwarder)(nil)
)
