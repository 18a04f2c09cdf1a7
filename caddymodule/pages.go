package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/pages"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

func init() {
	caddy.RegisterModule(new(Pages))
	httpcaddyfile.RegisterHandlerDirective("sandbox_pages", parsePagesDirective)
	// The pages spend their own tickets (a person gets a readable page, not a JSON 401), so they must see a
	// request before sandbox_ticket (ordered before basic_auth), and after rewrite and uri.
	httpcaddyfile.RegisterDirectiveOrder("sandbox_pages", httpcaddyfile.Before, "try_files")
}

// Pages is the http.handlers.sandbox_pages handler: the terminal and desktop pages of each sandbox, the console
// and their assets. Requests that are not for a page go to the next handler.
type Pages struct {
	// TicketSecret signs and verifies tickets; default {env.SANDGATE_TICKET_SECRET}.
	TicketSecret string `json:"ticket_secret,omitempty"`
	// ConsoleKeys are keys that may log in to the console, beside the API's keys when APIKeys is set.
	ConsoleKeys []service.KeyConfig `json:"console_keys,omitempty"`
	// APIKeys lets the sandbox_api's keys (those of the API whose data dir is APIDataDir) log in to the console,
	// with their owners and scopes. Without it or ConsoleKeys the console is off.
	APIKeys bool `json:"api_keys,omitempty"`
	// APIDataDir names that API's data dir; default as sandbox_api's (BAY_DATA_DIR, else <caddy data>/sandgate).
	APIDataDir string `json:"api_data_dir,omitempty"`
	// TicketLifetime of the tickets the console mints (default 60s).
	TicketLifetime caddy.Duration `json:"ticket_lifetime,omitempty"`
	// SessionLifetime of the cookie a page ticket buys (default 10m).
	SessionLifetime caddy.Duration `json:"session_lifetime,omitempty"`
	// ConsoleSessionTTL is how long a console login lasts (default 30m).
	ConsoleSessionTTL caddy.Duration `json:"console_session_ttl,omitempty"`
	// BaseDomains of the subdomain form, as in sandbox_ticket.
	BaseDomains []string `json:"base_domains,omitempty"`
	// ContentBaseURL is the content origin's base (https://sandbox.example.com): the console opens apps at
	// https://{id}.sandbox.example.com/ there, never on its own origin.
	ContentBaseURL string `json:"content_base_url,omitempty"`
	// verifierSettings must equal sandbox_ticket's: with them the pages share its verifier (and replay cache, or
	// the fleet's shared store of spent tickets).
	verifierSettings

	handler   *pages.Handler
	secretKey string
	storeKey  string
}

// CaddyModule returns the module information.
func (*Pages) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_pages", New: func() caddy.Module { return new(Pages) }}
}

// Provision builds the handler: no I/O, the Manager comes from the sandboxes app.
func (p *Pages) Provision(ctx caddy.Context) error {
	repl := caddy.NewReplacer()
	secret, err := ticketSecret(p.TicketSecret)
	if err != nil {
		return fmt.Errorf("sandbox_pages: %w", err)
	}
	app, err := sandboxesApp(ctx)
	if err != nil {
		return fmt.Errorf("sandbox_pages: %w", err)
	}
	mgr := app.Manager()
	// Share sandbox_ticket's store of spent nonces: it is what makes a ticket one-time, so a ticket spent on a page
	// must count as spent on the WebSocket routes too.
	verifier, poolKey, err := sharedVerifier(secret, p.verifierSettings)
	if err != nil {
		return fmt.Errorf("sandbox_pages: ticket verifier: %w", err)
	}
	p.secretKey = poolKey
	issuer, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(secret), DefaultLifetime: time.Duration(p.TicketLifetime)})
	if err != nil {
		return fmt.Errorf("sandbox_pages: ticket issuer: %w", err)
	}
	urls, err := tickets.ParseURLs("", repl.ReplaceKnown(p.ContentBaseURL, ""))
	if err != nil {
		return fmt.Errorf("sandbox_pages: content_base_url: %w", err)
	}
	// The Manager's kept-alive agent connections: a page's first call after a warm claim costs one round trip.
	// It follows no redirect (agentapi.NoRedirect): a replaced agent could name any host URL.
	agents := service.NewAgentClient(&http.Client{Timeout: pages.DefaultAgentTimeout, Transport: mgr.AgentHTTPClient().Transport,
		CheckRedirect: agentapi.NoRedirect})
	cfg := pages.Config{
		URLs:                urls,
		Verifier:            verifier,
		Service:             service.New(service.Config{Sandboxes: mgr, Agent: agents, Streamer: agents, Logger: ctx.Slogger()}),
		Issuer:              issuer,
		BaseDomains:         p.BaseDomains,
		PageSessionLifetime: time.Duration(p.SessionLifetime),
		ConsoleSessionTTL:   time.Duration(p.ConsoleSessionTTL),
	}
	var apiKeys pages.KeyLookup
	if p.APIKeys {
		dataDir, err := apiDataDir(app.BayEnv(), p.APIDataDir)
		if err != nil {
			return fmt.Errorf("sandbox_pages: %w", err)
		}
		ring, ringKey, err := loadAPIKeyRing(dataDir)
		if err != nil {
			return fmt.Errorf("sandbox_pages: the API's keys: %w", err)
		}
		p.storeKey, apiKeys = ringKey, ring
	}
	if cfg.Keys, err = pages.ConsoleKeys(expandKeys(p.ConsoleKeys), apiKeys); err != nil {
		return fmt.Errorf("sandbox_pages: %w", err)
	}
	cfg.ShowUsage = cfg.Keys != nil // CPU and memory in the console's list, from the Manager's engine
	p.handler, err = pages.New(cfg)
	return err
}

// ServeHTTP serves the pages and passes everything else on.
func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !p.handler.Handles(r) {
		return next.ServeHTTP(w, r)
	}
	p.handler.ServeHTTP(w, r)
	return nil
}

// Cleanup ends the console's event streams and releases the shared verifier.
func (p *Pages) Cleanup() error {
	if p.handler != nil {
		p.handler.Close()
	}
	return errors.Join(releaseKeyRing(p.storeKey), releaseVerifier(p.secretKey))
}

// UnmarshalCaddyfile reads `sandbox_pages { ... }`, one row per option; leeway, replay_cache and replay_redis
// as in sandbox_ticket.
func (p *Pages) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if err := opt.NoArgs(d); err != nil {
		return err
	}
	return opt.Block{
		"ticket_secret":       opt.String(&p.TicketSecret),
		"api_keys":            opt.FlagArg(&p.APIKeys, &p.APIDataDir), // [<api data dir>]: sandbox_api's keys log in to the console too
		"console_key":         consoleKeyOption(&p.ConsoleKeys),
		"ticket_lifetime":     opt.PositiveDuration("ticket_lifetime", &p.TicketLifetime),
		"session_lifetime":    opt.PositiveDuration("session_lifetime", &p.SessionLifetime),
		"console_session_ttl": opt.PositiveDuration("console_session_ttl", &p.ConsoleSessionTTL),
		"leeway":              opt.Duration(&p.Leeway),
		"replay_cache":        opt.PositiveInt("replay_cache", &p.ReplayCache),
		"replay_redis":        redisOption(&p.ReplayRedis),
		"content_base_url":    opt.String(&p.ContentBaseURL), // the content origin's base: the console opens apps there
		"base_domains":        opt.List(&p.BaseDomains),
	}.Parse(d, "sandbox_pages: unknown option %q")
}

// consoleKeyOption reads `console_key <key> [owner <name>] [admin]`, repeatable.
func consoleKeyOption(keys *[]service.KeyConfig) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		k, err := service.ParseConsoleKeyLine(d.RemainingArgs())
		if err != nil {
			return d.Err(err.Error())
		}
		*keys = append(*keys, k)
		return nil
	}
}

// Validate catches a console key without a value (a typo'd env placeholder is caught at Provision).
func (p *Pages) Validate() error {
	for i, k := range p.ConsoleKeys {
		if strings.TrimSpace(k.Key) == "" {
			return fmt.Errorf("sandbox_pages: console key %d is empty", i+1)
		}
	}
	return nil
}

func parsePagesDirective(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	p := new(Pages)
	return p, p.UnmarshalCaddyfile(h.Dispenser)
}

var (
	_ caddy.Provisioner           = (*Pages)(nil)
	_ caddy.Validator             = (*Pages)(nil)
	_ caddy.CleanerUpper          = (*Pages)(nil)
	_ caddyhttp.MiddlewareHandler = (*Pages)(nil)
	_ caddyfile.Unmarshaler       = (*Pages)(nil)
)
