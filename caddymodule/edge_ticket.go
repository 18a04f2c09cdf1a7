package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sandgate/sandgate/internal/redisstore"
	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/tickets"
)

func init() {
	caddy.RegisterModule(new(SandboxTicket))
}

// Variables the ticket handler sets for later handlers ({http.vars.<name>}).
const (
	varSandboxID  = "sandbox_id"
	varKind       = "sandbox_kind"
	varPermission = "sandbox_permission"
	varPort       = "sandbox_port"
	varPrefix     = "sandbox_prefix"
	varAddress    = "sandbox_address" // the parsed sandboxroute.Address, for sandbox_route
	varAgentToken = "sandbox_agent_token"
	defaultSecret = "{env." + tickets.EnvSecret + "}"
)

// spentNonces keeps one store of spent ticket nonces per secret across config reloads: a ticket spent before a reload
// must stay spent after it, whatever else the new config changes. Keyed by a hash of the secret, never the secret.
var spentNonces = newPool[*tickets.SpentNonces]()

// verifierSettings are the ticket verifier's options, the same in sandbox_ticket and sandbox_pages: the handlers of
// one secret share one store of spent tickets (sharedVerifier), so a ticket spent on a page is spent on its routes.
type verifierSettings struct {
	// Leeway absorbs clock skew on expiry; 0 means 5s.
	Leeway caddy.Duration `json:"leeway,omitempty"`
	// ReplayCache is how many live spent nonces one subject may hold; 0 means 100000.
	ReplayCache int `json:"replay_cache,omitempty"`
	// ReplayRedis keeps the spent nonces in the Redis a gateway fleet shares instead of this process's memory, so
	// a ticket spent through any gateway is refused by all of them. Redis not answering refuses tickets (503,
	// retryable), never admits them.
	ReplayRedis *RedisConfig `json:"replay_redis,omitempty"`
}

// SandboxTicket is the `http.handlers.sandbox_ticket` handler: it admits a browser request to one sandbox route
// with a one-time ticket (query `ticket=` or `Authorization: Bearer`) or the session cookie an earlier ticket set,
// puts the sandbox id, kind and permission in {http.vars.sandbox_*}, and strips the credential before anything is
// proxied. Refusals get a generic 401; the reason is logged.
type SandboxTicket struct {
	// Secret is the HMAC key shared with the ticket issuer (the API); at least 32 bytes. Placeholders are
	// expanded; the default is {env.SANDGATE_TICKET_SECRET}. It is never generated: tickets must survive restarts.
	Secret string `json:"secret,omitempty"`
	// Kind restricts the handler to one route kind; empty admits any kind the request names.
	Kind string `json:"kind,omitempty"`
	// BaseDomains enable the subdomain form ({port}-{id}.{base}, {id}.{base}) for hosts under them.
	BaseDomains []string `json:"base_domains,omitempty"`
	// Session is the lifetime of the session cookie set after an accepted ticket; 0 means 10m, negative disables.
	Session caddy.Duration `json:"session,omitempty"`
	verifierSettings
	// APIKeys admits the sandbox_api's bearer keys (of the API whose data dir is APIDataDir) on mcp routes, for
	// the sandboxes of the key's owner.
	APIKeys    bool   `json:"api_keys,omitempty"`
	APIDataDir string `json:"api_data_dir,omitempty"`

	gate     *sandboxroute.Gate
	poolKey  string
	storeKey string
	logger   *zap.Logger
	slog     *slog.Logger
}

// CaddyModule returns the Caddy module information.
func (*SandboxTicket) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_ticket", New: func() caddy.Module { return new(SandboxTicket) }}
}

// Provision reads the secret and takes the shared verifier for it.
func (h *SandboxTicket) Provision(ctx caddy.Context) error {
	h.logger, h.slog = ctx.Logger(), ctx.Slogger()
	secret, err := ticketSecret(h.Secret)
	if err != nil {
		return fmt.Errorf("sandbox_ticket: %w", err)
	}
	v, poolKey, err := sharedVerifier(secret, h.verifierSettings)
	if err != nil {
		return fmt.Errorf("sandbox_ticket: %w", err)
	}
	h.poolKey = poolKey
	h.gate, err = sandboxroute.NewGate(sandboxroute.GateConfig{Verifier: v, BaseDomains: h.BaseDomains, Kind: h.Kind, Session: time.Duration(h.Session)})
	if err != nil {
		return fmt.Errorf("sandbox_ticket: %w", err)
	}
	if h.APIKeys {
		checker, storeKey, err := newAPIKeyChecker(ctx, h.APIDataDir)
		if err != nil {
			return fmt.Errorf("sandbox_ticket: api_keys: %w", err)
		}
		h.storeKey, h.gate.APIKeys = storeKey, checker
	}
	return nil
}

// Cleanup releases the shared store of spent nonces and the API's key ring.
func (h *SandboxTicket) Cleanup() error {
	return errors.Join(releaseVerifier(h.poolKey), releaseKeyRing(h.storeKey))
}

// ticketSecret is the secret raw names (placeholders expanded; default {env.SANDGATE_TICKET_SECRET}), the same for
// sandbox_ticket, sandbox_pages and sandbox_api, so all of them reach the same verifier.
func ticketSecret(raw string) (string, error) {
	if raw == "" {
		raw = defaultSecret
	}
	secret := caddy.NewReplacer().ReplaceKnown(raw, "")
	if len(secret) < tickets.MinSecretLength {
		return "", fmt.Errorf("the ticket secret (%s) is %d bytes; at least %d are required", raw, len(secret), tickets.MinSecretLength)
	}
	return secret, nil
}

// sharedVerifier returns a ticket verifier over the store of spent nonces that every handler with the same secret
// shares (sandbox_ticket, sandbox_pages), so a ticket spent on one route is spent on all of them, across reloads:
// in memory, or with rdb in the fleet's Redis, where every gateway of the fleet shares it. Release the returned
// pool key with releaseVerifier.
func sharedVerifier(secret string, s verifierSettings) (*tickets.Verifier, string, error) {
	leeway, size, rdb := time.Duration(s.Leeway), s.ReplayCache, s.ReplayRedis
	if size <= 0 {
		size = tickets.DefaultReplayCacheSize
	}
	sum := sha256.Sum256([]byte("sandgate ticket secret\x00" + secret))
	if rdb != nil {
		return redisVerifier(secret, leeway, size, rdb, hex.EncodeToString(sum[:8]))
	}
	poolKey := "sandgate.tickets.spent." + hex.EncodeToString(sum[:])
	spent, err := spentNonces.load(poolKey, func() (*tickets.SpentNonces, error) { return tickets.NewSpentNonces(size, nil) })
	if err != nil {
		return nil, "", err
	}
	if size > spent.Size() {
		// Grow only: a smaller setting in a later config must not evict live nonces (it would fail closed, but
		// refuse good tickets); the store shrinks when the process restarts.
		if err := spent.Resize(size); err != nil {
			_ = spentNonces.release(poolKey)
			return nil, "", err
		}
	}
	v, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: []byte(secret), Leeway: leeway, Spent: spent})
	if err != nil {
		_ = spentNonces.release(poolKey)
		return nil, "", err
	}
	return v, poolKey, nil
}

// redisVerifier is sharedVerifier over Redis. The keys carry a tag of the secret (a hash, never the secret): a
// rotated secret starts an empty namespace, and fleets with different secrets never share a per-subject bound.
func redisVerifier(secret string, leeway time.Duration, size int, rdb *RedisConfig, tag string) (*tickets.Verifier, string, error) {
	cl, prefix, key, err := redisClient(rdb)
	if err != nil {
		return nil, "", fmt.Errorf("replay_redis: %w", err)
	}
	spent, err := redisstore.NewSpentNonces(cl, prefix+"tickets:"+tag+":", size)
	if err == nil {
		var v *tickets.Verifier
		if v, err = tickets.NewVerifier(tickets.VerifierConfig{Secret: []byte(secret), Leeway: leeway, Spent: spent}); err == nil {
			return v, key, nil
		}
	}
	_ = releaseRedis(key)
	return nil, "", err
}

// releaseVerifier drops a reference taken by sharedVerifier; an empty key is a no-op.
func releaseVerifier(poolKey string) error {
	if strings.HasPrefix(poolKey, "sandgate.redis.") {
		return releaseRedis(poolKey)
	}
	return spentNonces.release(poolKey)
}

func (h *SandboxTicket) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	grant, err := h.gate.Authorize(w, r)
	if err != nil {
		if !sandboxroute.WriteRefusal(w, err, h.slog, sandboxroute.Refused{RemoteIP: clientIP(r), RequestID: requestID(repl)}) {
			return caddyhttp.Error(http.StatusInternalServerError, err)
		}
		return nil
	}
	a := grant.Address
	ctx := r.Context()
	caddyhttp.SetVar(ctx, varSandboxID, a.SandboxID)
	caddyhttp.SetVar(ctx, varKind, string(a.Kind))
	caddyhttp.SetVar(ctx, varPermission, string(grant.Claims.Permission))
	caddyhttp.SetVar(ctx, varPrefix, a.Prefix)
	if a.Port != 0 {
		caddyhttp.SetVar(ctx, varPort, strconv.Itoa(a.Port))
	}
	caddyhttp.SetVar(ctx, varAddress, a)
	if c := h.logger.Check(zap.DebugLevel, "ticket accepted"); c != nil {
		c.Write(zap.String("sandbox", a.SandboxID), zap.String("kind", string(a.Kind)), zap.String("via", grant.Via),
			zap.String("subject", grant.Claims.Subject))
	}
	return next.ServeHTTP(w, r)
}

func requestID(repl *caddy.Replacer) string {
	if repl == nil {
		return ""
	}
	return repl.ReplaceAll("{http.request.uuid}", "")
}

func clientIP(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok {
		return ip
	}
	return r.RemoteAddr
}

var (
	_ caddy.Provisioner           = (*SandboxTicket)(nil)
	_ caddy.CleanerUpper          = (*SandboxTicket)(nil)
	_ caddyhttp.MiddlewareHandler = (*SandboxTicket)(nil)
)
