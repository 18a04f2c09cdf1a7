package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/opensandbox"
	"github.com/sandgate/sandgate/sandboxes"
)

func init() {
	caddy.RegisterModule(new(SandboxOpenSandbox))
	httpcaddyfile.RegisterDirective("sandbox_opensandbox", parseSandboxOpenSandbox)
	httpcaddyfile.RegisterDirectiveOrder("sandbox_opensandbox", httpcaddyfile.Before, "respond")
}

// SandboxOpenSandbox is the `http.handlers.sandbox_opensandbox` handler: OpenSandbox's lifecycle API
// (routes/opensandbox) at / and /v1, with sandbox_api's keys and owners. Admitted proxy requests
// (/sandboxes/{id}/proxy/{port}/...) go to the next handler, the reverse_proxy the directive puts after it, with
// {http.vars.sandbox_id} and {http.vars.sandbox_agent_token} set.
type SandboxOpenSandbox struct {
	// APIDataDir is the data dir of the sandbox_api whose keys are accepted (default: sandbox_api's default).
	APIDataDir string `json:"api_data_dir,omitempty"`
	// EndpointHost is the host[:port] endpoints name; default the request's Host.
	EndpointHost string `json:"endpoint_host,omitempty"`
	// MaxTimeout caps a sandbox's timeout; 0: no cap beyond the Manager's.
	MaxTimeout caddy.Duration `json:"max_timeout,omitempty"`
	// StartTimeout bounds a proxy request's wait for an idle sandbox; default 60s.
	StartTimeout caddy.Duration `json:"start_timeout,omitempty"`

	handler  *opensandbox.Handler
	storeKey string
}

// CaddyModule returns the Caddy module information.
func (*SandboxOpenSandbox) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_opensandbox", New: func() caddy.Module { return new(SandboxOpenSandbox) }}
}

// Provision links the dialect to the Manager and to sandbox_api's key ring.
func (h *SandboxOpenSandbox) Provision(ctx caddy.Context) error {
	checker, storeKey, err := newAPIKeyChecker(ctx, h.APIDataDir)
	if err != nil {
		return fmt.Errorf("sandbox_opensandbox: %w", err)
	}
	h.storeKey = storeKey
	h.handler = opensandbox.New(opensandbox.Config{
		Service: checker.Service, Keys: checker.Keys,
		EndpointHost: caddy.NewReplacer().ReplaceKnown(h.EndpointHost, ""),
		MaxTimeout:   time.Duration(h.MaxTimeout), StartTimeout: time.Duration(h.StartTimeout),
		Logger: ctx.Slogger(),
	})
	return nil
}

// Cleanup releases this config's reference to the API's key ring.
func (h *SandboxOpenSandbox) Cleanup() error { return releaseKeyRing(h.storeKey) }

func (h *SandboxOpenSandbox) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	fwd := &varsForwarder{serve: next.ServeHTTP}
	h.handler.Serve(w, r, fwd)
	return fwd.err
}

// varsForwarder hands a request the dialect admitted to serve (Caddy's reverse_proxy with the `sandbox`
// upstream, next here or E2B's edge proxy) with the upstream's variables set: the sandbox and its agent token.
type varsForwarder struct {
	serve func(w http.ResponseWriter, r *http.Request) error
	err   error
}

func (f *varsForwarder) Forward(w http.ResponseWriter, r *http.Request, t sandboxes.Target) {
	caddyhttp.SetVar(r.Context(), varSandboxID, t.SandboxID)
	caddyhttp.SetVar(r.Context(), varAgentToken, t.Token)
	f.err = f.serve(w, r)
}

// parseSandboxOpenSandbox expands
//
//	sandbox_opensandbox [<matcher>] {
//	    api_data_dir  <dir>        # the sandbox_api whose keys are accepted
//	    endpoint_host <host:port>  # what endpoints name, default the request's Host
//	    max_timeout   <duration>   # cap on a sandbox's timeout
//	    start_timeout <duration>   # proxy wait for an idle sandbox, default 60s
//	    rewrite_host  <host>       # as sandbox_proxy's
//	}
//
// into a route of the dialect's handler and a streaming reverse_proxy with the `sandbox` upstream for its proxy.
func parseSandboxOpenSandbox(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	matcher, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	h.Next()
	if err := opt.NoArgs(h.Dispenser); err != nil {
		return nil, err
	}
	m := new(SandboxOpenSandbox)
	upstreams := new(SandboxUpstreams)
	err = opt.Block{
		"api_data_dir":  opt.String(&m.APIDataDir),
		"endpoint_host": opt.String(&m.EndpointHost),
		"rewrite_host":  opt.String(&upstreams.RewriteHost),
		"max_timeout":   opt.PositiveDuration("max_timeout", &m.MaxTimeout),
		"start_timeout": opt.PositiveDuration("start_timeout", &m.StartTimeout),
	}.Parse(h.Dispenser, "unknown sandbox_opensandbox option %q")
	if err != nil {
		return nil, err
	}
	route := caddyhttp.Route{HandlersRaw: []json.RawMessage{
		caddyconfig.JSONModuleObject(m, "handler", "sandbox_opensandbox", nil),
		caddyconfig.JSONModuleObject(writeProxy(upstreams), "handler", "reverse_proxy", nil),
	}}
	if matcher != nil {
		route.MatcherSetsRaw = []caddy.ModuleMap{matcher}
	}
	return []httpcaddyfile.ConfigValue{{Class: "route", Value: route}}, nil
}

// Validate checks the settings.
func (h *SandboxOpenSandbox) Validate() error {
	if h.MaxTimeout < 0 || h.StartTimeout < 0 {
		return errors.New("sandbox_opensandbox: timeouts must not be negative")
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*SandboxOpenSandbox)(nil)
	_ caddy.CleanerUpper          = (*SandboxOpenSandbox)(nil)
	_ caddy.Validator             = (*SandboxOpenSandbox)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxOpenSandbox)(nil)
	_ opensandbox.Forwarder       = (*varsForwarder)(nil)
)
