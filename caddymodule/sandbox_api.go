package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/spf13/cobra"

	"github.com/sandgate/sandgate/internal/buildversion"
	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/routes/mcpapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

func init() {
	caddy.RegisterModule(new(SandboxAPI))
	httpcaddyfile.RegisterHandlerDirective("sandbox_api", parseSandboxAPI)
	// First of the responding handlers (before respond and reverse_proxy): it answers only /health and /v1/...
	// and passes everything else on, so a site can serve the API and respond/proxy the rest without an `order` line.
	httpcaddyfile.RegisterDirectiveOrder("sandbox_api", httpcaddyfile.Before, "respond")
	// `caddy sandgate-mcp` bridges an MCP client that only launches commands (stdio) to a gateway's /mcp.
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "sandgate-mcp",
		Usage: "--url <https://gateway> (--key-file <file> | --key-env <VAR>)",
		Short: "Bridges MCP over stdio to a sandgate gateway's /mcp",
		Long:  mcpapi.BridgeHelp,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("url", "", "gateway base URL, e.g. https://gw.example.com")
			cmd.Flags().String("key-file", "", "file holding the API key")
			cmd.Flags().String("key-env", "SANDGATE_API_KEY", "environment variable holding the API key, when no --key-file")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				if err := mcpapi.RunBridge(ctx, fl.String("url"), fl.String("key-file"), fl.String("key-env")); err != nil {
					return 1, fmt.Errorf("sandgate-mcp: %w", err)
				}
				return 0, nil
			})
		},
	})
}

// apiKeyRings holds, per API data dir, the key ring the latest sandbox_api of that dir loaded, across reloads: the
// console, the OpenSandbox dialect and sandbox_ticket's api_keys admit that ring's keys, so a reload that changes
// the API's keys changes them everywhere. The keys' store is the Manager's one store.
// The ring is memory: the last release has nothing to close.
var apiKeyRings = newPool[*service.LiveKeys]()

// loadAPIKeyRing takes a reference to the key ring of dataDir; release it with releaseKeyRing(key).
func loadAPIKeyRing(dataDir string) (ring *service.LiveKeys, key string, err error) {
	key = filepath.Clean(dataDir)
	ring, err = apiKeyRings.load(key, func() (*service.LiveKeys, error) { return new(service.LiveKeys), nil })
	return ring, key, err
}

// releaseKeyRing drops a reference taken by loadAPIKeyRing; an empty key is a no-op.
func releaseKeyRing(key string) error { return apiKeyRings.release(key) }

// apiDataDir is where sandbox_api keeps credentials.json (and finds an old bayapi.db): BAY_DATA_DIR, else
// configured, else <caddy data dir>/sandgate.
func apiDataDir(env bayapi.BayEnv, configured string) (string, error) {
	return bayapi.ResolveDataDir(env, configured, filepath.Join(caddy.AppDataDir(), "sandgate"))
}

// SandboxAPI is the `http.handlers.sandbox_api` handler: the Bay-compatible REST API (/health and /v1/...).
// Requests for other paths go to the next handler.
type SandboxAPI struct {
	// APIKey is the primary key (Bay's security.api_key), owner "default". BAY_API_KEY or BAY_SECURITY__API_KEY
	// override it. With neither, a stored key is used, else one is generated and written to credentials.json.
	APIKey string `json:"api_key,omitempty"`
	// Keys are further keys, each with its owner, some with the admin scope (sees every owner's sandboxes).
	Keys []service.KeyConfig `json:"keys,omitempty"`
	// AllowAnonymous accepts calls without a token, owned by X-Owner or "default" (BAY_SECURITY__ALLOW_ANONYMOUS
	// overrides it).
	AllowAnonymous bool `json:"allow_anonymous,omitempty"`
	// DataDir holds credentials.json (and, before the API's state moved into the Manager's one store, bayapi.db,
	// which the first start imports); BAY_DATA_DIR overrides it; default <caddy data dir>/sandgate.
	DataDir string `json:"data_dir,omitempty"`
	// Endpoint is written into credentials.json; default http://{BAY_SERVER__HOST or 0.0.0.0}:{BAY_SERVER__PORT or 8114}.
	Endpoint string `json:"endpoint,omitempty"`
	// MaxUploadBytes caps one upload (default 1 GiB).
	MaxUploadBytes int64 `json:"max_upload_bytes,omitempty"`
	// TicketSecret enables POST /v1/sandboxes/{id}/tickets; it must equal the sandbox_ticket verifier's secret.
	// Default {env.SANDGATE_TICKET_SECRET}, as for sandbox_ticket; with neither, the tickets route is disabled.
	TicketSecret string `json:"ticket_secret,omitempty"`
	// TicketBaseURL, when set, makes ticket answers carry a ready-to-open URL (https://gw.example.com).
	TicketBaseURL string `json:"ticket_base_url,omitempty"`
	// ContentBaseURL is the content origin's base (https://sandbox.example.com): app tickets then open at
	// https://{id}.sandbox.example.com/ instead of a path on the gateway's origin.
	ContentBaseURL string `json:"content_base_url,omitempty"`

	// MCP serves the gateway's MCP server (Streamable HTTP) at this path, e.g. /mcp; empty: off.
	MCP string `json:"mcp,omitempty"`

	handler *bayapi.Handler
	mcp     *mcpapi.Server
	ringKey string
}

// CaddyModule returns the Caddy module information.
func (*SandboxAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_api", New: func() caddy.Module { return new(SandboxAPI) }}
}

// Provision applies the BAY_* overrides the sandboxes app read, imports an old bayapi.db into the Manager's store,
// loads the API keys (generating Bay's credentials.json on first start) and wires the handler to the Manager.
func (s *SandboxAPI) Provision(ctx caddy.Context) error {
	app, err := sandboxesApp(ctx)
	if err != nil {
		return fmt.Errorf("sandbox_api: %w", err)
	}
	env := app.BayEnv()
	dataDir, err := apiDataDir(env, s.DataDir)
	if err != nil {
		return fmt.Errorf("sandbox_api: %w", err)
	}
	if err := app.Store().ImportLegacyAPIStore(dataDir, ctx.Slogger()); err != nil {
		return fmt.Errorf("sandbox_api: %w", err)
	}
	keys, anonymous, err := s.loadKeys(ctx, app.Store(), env, dataDir)
	if err != nil {
		return fmt.Errorf("sandbox_api: %w", err)
	}
	minter, err := s.ticketMinter()
	if err != nil {
		return fmt.Errorf("sandbox_api: %w", err)
	}
	svc := s.service(ctx, app, minter)
	s.handler = bayapi.New(bayapi.Config{Service: svc, Keys: keys, AllowAnonymous: anonymous,
		Version: sandgateVersion(), Logger: ctx.Slogger()})
	if err := s.serveMCP(ctx, svc, keys); err != nil {
		return fmt.Errorf("sandbox_api: %w", err)
	}
	return nil
}

// loadKeys loads the API keys into the data dir's shared ring (bayapi.LoadKeys) and says whether calls without a
// token are accepted. Keys may be runtime placeholders ({env.NAME}, {file./run/secrets/key}) so they stay out of
// the config.
func (s *SandboxAPI) loadKeys(ctx caddy.Context, st *sandboxes.BoltStore, env bayapi.BayEnv, dataDir string) (*service.KeyRing, bool, error) {
	ring, ringKey, err := loadAPIKeyRing(dataDir)
	if err != nil {
		return nil, false, err
	}
	s.ringKey = ringKey
	repl := caddy.NewReplacer()
	extra := expandKeys(s.Keys)
	keys, anonymous, err := bayapi.LoadKeys(context.Background(), st, env, bayapi.KeySettings{APIKey: repl.ReplaceKnown(s.APIKey, ""),
		Keys: extra, AllowAnonymous: s.AllowAnonymous, Endpoint: s.Endpoint, DataDir: dataDir}, ctx.Slogger())
	if err != nil {
		return nil, false, err
	}
	ring.Store(keys)
	return keys, anonymous, nil
}

// expandKeys expands the keys' runtime placeholders ({env.NAME}, {file./run/secrets/key}).
func expandKeys(keys []service.KeyConfig) []service.KeyConfig {
	repl := caddy.NewReplacer()
	out := make([]service.KeyConfig, len(keys))
	for i, k := range keys {
		k.Key = repl.ReplaceKnown(k.Key, "")
		out[i] = k
	}
	return out
}

// ticketMinter mints the tickets of POST /v1/sandboxes/{id}/tickets; nil (the route disabled) with no secret.
func (s *SandboxAPI) ticketMinter() (service.TicketIssuer, error) {
	repl := caddy.NewReplacer()
	secret := s.TicketSecret
	if secret == "" {
		secret = defaultSecret // the sandbox_ticket verifier's default too
	}
	return service.TicketMinterFor(repl.ReplaceKnown(secret, ""), repl.ReplaceKnown(s.TicketBaseURL, ""), repl.ReplaceKnown(s.ContentBaseURL, ""))
}

// service builds the operations the REST API and the MCP server share, over the app's Manager and store.
func (s *SandboxAPI) service(ctx caddy.Context, app *App, minter service.TicketIssuer) *service.Service {
	st := app.Store()
	exports, _ := app.Exports.limits() // checked by the app's Validate
	agents := service.NewAgentClient(app.Manager().AgentHTTPClient())
	ops := service.Config{
		Sandboxes: app.Manager(), Agent: agents, Streamer: agents, History: st,
		ManagedWorkspace: bayapi.ManagedCargo(), Exports: st, Skills: st, Fetch: bayapi.FetchPublic,
		ExportLimits: exports, MaxUploadBytes: s.MaxUploadBytes, Logger: ctx.Slogger(),
		Tickets: minter,
	}
	st.SetLogger(ctx.Slogger()) // history write failures are the API's to report
	svc := service.New(ops)
	go svc.RunBrowserLearning(ctx, service.DefaultLearnPolicy()) // Bay's learning pass, for as long as this config lives
	return svc
}

// serveMCP links the MCP server of this API's data dir to the service, when mcp is configured.
func (s *SandboxAPI) serveMCP(ctx caddy.Context, svc *service.Service, keys *service.KeyRing) error {
	if s.MCP == "" {
		return nil
	}
	var err error
	if s.mcp, err = loadMCPServer(s.ringKey, ctx.Slogger()); err != nil {
		return err
	}
	s.mcp.SetOps(svc, keys)
	return nil
}

// Cleanup releases this config's references to the shared key ring and MCP server.
func (s *SandboxAPI) Cleanup() error {
	if s.ringKey == "" {
		return nil
	}
	errs := []error{releaseKeyRing(s.ringKey)}
	if s.mcp != nil {
		errs = append(errs, mcpServers.release(s.ringKey))
	}
	return errors.Join(errs...)
}

// ServeHTTP serves /health, /v1/... and the MCP path; anything else goes to next.
func (s *SandboxAPI) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if s.mcp != nil && r.URL.Path == s.MCP {
		s.mcp.Handler().ServeHTTP(w, r)
		return nil
	}
	if !s.handler.Owns(r) {
		return next.ServeHTTP(w, r)
	}
	s.handler.ServeHTTP(w, r)
	return nil
}

// parseSandboxAPI reads `sandbox_api { ... }`, one row per option (the SandboxAPI fields say what each is).
func parseSandboxAPI(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(SandboxAPI)
	h.Next()
	if err := opt.NoArgs(h.Dispenser); err != nil {
		return nil, err
	}
	key := func(d *caddyfile.Dispenser) error { // key <secret> <owner> [admin], repeatable
		k, err := service.ParseKeyLine(d.RemainingArgs())
		if err != nil {
			return d.Err(err.Error())
		}
		s.Keys = append(s.Keys, k)
		return nil
	}
	return s, opt.Block{
		"api_key":          opt.String(&s.APIKey), // owner "default"
		"key":              key,
		"allow_anonymous":  opt.Flag(&s.AllowAnonymous),
		"data_dir":         opt.String(&s.DataDir),
		"endpoint":         opt.String(&s.Endpoint),
		"max_upload":       opt.Arg(func(v string) (err error) { s.MaxUploadBytes, err = sandboxes.ParseBytes(v); return err }),
		"ticket_secret":    opt.String(&s.TicketSecret),
		"ticket_base_url":  opt.String(&s.TicketBaseURL),
		"content_base_url": opt.String(&s.ContentBaseURL),
		"mcp":              opt.OptString(&s.MCP, "/mcp"),
	}.Parse(h.Dispenser, "unknown sandbox_api option %q")
}

// Validate checks the keys, the MCP path and the upload cap.
func (s *SandboxAPI) Validate() error {
	if err := (bayapi.KeySettings{APIKey: s.APIKey, Keys: s.Keys}).Validate(); err != nil {
		return fmt.Errorf("sandbox_api: %w", err)
	}
	if s.MCP != "" {
		if err := bayapi.CheckBesideAPI("mcp", s.MCP); err != nil {
			return fmt.Errorf("sandbox_api: %w", err)
		}
	}
	if s.MaxUploadBytes < 0 {
		return fmt.Errorf("sandbox_api: max_upload must not be negative")
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*SandboxAPI)(nil)
	_ caddy.CleanerUpper          = (*SandboxAPI)(nil)
	_ caddy.Validator             = (*SandboxAPI)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxAPI)(nil)
)

// mcpServers keeps one MCP server per API data dir across reloads: its sessions live in the server, so a client's
// session id keeps working after `caddy reload`; the new config only points the tools at its own handler (SetOps).
// The server has no Close: sessions end with their idle timeout or the process.
var mcpServers = newPool[*mcpapi.Server]()

// loadMCPServer takes a reference to the MCP server of the API data dir key; release it with mcpServers.release(key).
func loadMCPServer(key string, logger *slog.Logger) (*mcpapi.Server, error) {
	return mcpServers.load(key, func() (*mcpapi.Server, error) {
		return mcpapi.New(mcpapi.Options{Version: sandgateVersion(), Logger: logger}), nil
	})
}

// newAPIKeyChecker takes a reference to the live key ring of dataDir; release it with releaseKeyRing(key).
func newAPIKeyChecker(ctx caddy.Context, dataDir string) (service.KeyGate, string, error) {
	app, err := sandboxesApp(ctx)
	if err != nil {
		return service.KeyGate{}, "", err
	}
	dir, err := apiDataDir(app.BayEnv(), dataDir)
	if err != nil {
		return service.KeyGate{}, "", err
	}
	ring, ringKey, err := loadAPIKeyRing(dir)
	if err != nil {
		return service.KeyGate{}, "", fmt.Errorf("the API's keys: %w", err)
	}
	// Lifecycle only: no agent client, so whatever reaches an agent through it answers capability_not_supported.
	svc := service.New(service.Config{Sandboxes: app.Manager(), Logger: ctx.Slogger()})
	return service.KeyGate{Service: svc, Keys: ring}, ringKey, nil
}

// buildVersion is set by the build scripts (xcaddy.sh, from scripts/version.sh) with
// -ldflags "-X github.com/sandgate/sandgate/caddymodule.buildVersion=...".
var buildVersion string

// sandgateVersion is the semantic version of sandgate in this binary, for /health and the containers' version.
var sandgateVersion = sync.OnceValue(func() string { return buildversion.Of(buildVersion, "github.com/sandgate/sandgate") })
