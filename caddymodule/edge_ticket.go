package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/routes/tickets"
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

// verifiers keeps one tickets.Verifier per secret across config reloads: a ticket spent before a reload must stay
// spent after it. Keyed by a hash of the secret and the verifier's settings, never by the secret itself.
var verifiers = caddy.NewUsagePool()

type pooledVerifier struct{ *tickets.Verifier }

func (pooledVerifier) Destruct() error { return nil }

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
	// Leeway absorbs clock skew on expiry; 0 means 5s.
	Leeway caddy.Duration `json:"leeway,omitempty"`
	// ReplayCache is how many spent nonces are remembered; 0 means 100000.
	ReplayCache int `json:"replay_cache,omitempty"`

	gate    *sandboxroute.Gate
	poolKey string
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*SandboxTicket) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sandbox_ticket", New: func() caddy.Module { return new(SandboxTicket) }}
}

// Provision reads the secret and takes the shared verifier for it.
func (h *SandboxTicket) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	raw := h.Secret
	if raw == "" {
		raw = defaultSecret
	}
	secret := caddy.NewReplacer().ReplaceKnown(raw, "")
	if len(secret) < tickets.MinSecretLength {
		return fmt.Errorf("sandbox_ticket: the ticket secret (%s) is %d bytes; at least %d are required",
			raw, len(secret), tickets.MinSecretLength)
	}
	var kind tickets.Kind
	if h.Kind != "" {
		k, err := tickets.ParseKind(h.Kind)
		if err != nil {
			return fmt.Errorf("sandbox_ticket: %w", err)
		}
		kind = k
	}
	session := time.Duration(h.Session)
	switch {
	case session == 0:
		session = tickets.DefaultSessionLifetime
	case session < 0:
		session = 0
	}
	sum := sha256.Sum256([]byte(secret + "\x00" + strconv.FormatInt(int64(h.Leeway), 10) + "\x00" + strconv.Itoa(h.ReplayCache)))
	h.poolKey = "sandgate.tickets." + hex.EncodeToString(sum[:])
	v, _, err := verifiers.LoadOrNew(h.poolKey, func() (caddy.Destructor, error) {
		ver, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: []byte(secret),
			Leeway: time.Duration(h.Leeway), ReplayCacheSize: h.ReplayCache})
		if err != nil {
			return nil, err
		}
		return pooledVerifier{ver}, nil
	})
	if err != nil {
		return fmt.Errorf("sandbox_ticket: %w", err)
	}
	bases := make([]string, 0, len(h.BaseDomains))
	for _, b := range h.BaseDomains {
		if b = strings.Trim(strings.ToLower(b), "."); b != "" {
			bases = append(bases, b)
		}
	}
	h.gate = &sandboxroute.Gate{Verifier: v.(pooledVerifier).Verifier, BaseDomains: bases, Kind: kind, SessionLifetime: session}
	return nil
}

// Cleanup releases the shared verifier.
func (h *SandboxTicket) Cleanup() error {
	if h.poolKey != "" {
		_, err := verifiers.Delete(h.poolKey)
		return err
	}
	return nil
}

func (h *SandboxTicket) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	grant, err := h.gate.Authorize(w, r)
	if err != nil {
		reqID := requestID(repl)
		if !sandboxroute.IsRefusal(err) {
			sandboxroute.WriteJSONError(w, http.StatusNotFound, sandboxroute.ErrorDetail{Code: "not_found",
				Message: "no sandbox route here", RequestID: reqID})
			return nil
		}
		if c := h.logger.Check(zap.InfoLevel, "ticket refused"); c != nil {
			c.Write(zap.String("reason", reasonOf(err)), zap.String("detail", err.Error()),
				zap.String("remote_ip", clientIP(r)), zap.String("request_id", reqID))
		}
		sandboxroute.WriteUnauthorized(w, reqID)
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

func reasonOf(err error) string {
	var te *tickets.Error
	if errors.As(err, &te) {
		return string(te.Reason)
	}
	return "unknown"
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
