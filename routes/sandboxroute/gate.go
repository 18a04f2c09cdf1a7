package sandboxroute

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/tickets"
)

// TicketParam is the query parameter carrying a ticket.
const TicketParam = tickets.Param

// SessionCookie is the name of the session cookie.
const SessionCookie = "sandgate_session"

// GatewayHeaderPrefix starts the headers only the gateway may send to an agent (token, limits, filters). A client's
// copies are removed.
const GatewayHeaderPrefix = "X-Sandgate-"

// Gate admits browser requests carrying a ticket or a session cookie.
type Gate struct {
	Verifier *tickets.Verifier
	// BaseDomains enable the subdomain form for hosts under them.
	BaseDomains []string
	// Kind, when set, is the only route kind this gate admits.
	Kind tickets.Kind
	// SessionLifetime > 0 sets a session cookie after an accepted ticket; 0 disables sessions.
	SessionLifetime time.Duration
	// APIKeys, when set, also admits the API's bearer keys on mcp routes, for the sandboxes the key may see.
	APIKeys KeyChecker
}

// KeyChecker checks an API key presented on a sandbox route.
type KeyChecker interface {
	// KeyAllows reports whether token is an API key whose owner owns sandbox id (or an admin key). A sandbox of
	// another owner and one that does not exist answer alike.
	KeyAllows(ctx context.Context, token, sandboxID string) bool
}

// Grant is an admitted request.
type Grant struct {
	Address Address
	Claims  *tickets.Claims
	// Via says what was presented: "query", "bearer", "session" or "api_key".
	Via string
}

// Authorize finds the request's address and credential and checks them. On success it removes the credential from
// the request (the ticket from the query and RequestURI, a bearer ticket's Authorization header, the session cookie)
// and the client's X-Sandgate-* headers, and sets the session cookie on w when sessions are on. A refusal is a
// *tickets.Error (for logs; answer with WriteUnauthorized) or ErrNotSandboxRoute.
func (g *Gate) Authorize(w http.ResponseWriter, r *http.Request) (Grant, error) {
	addr, err := fromRequest(r.Host, r.URL.EscapedPath(), g.BaseDomains)
	if err != nil {
		return Grant{}, err
	}
	if g.Kind != "" && addr.Kind != g.Kind {
		return Grant{}, fmt.Errorf("%w: this route serves %s, not %s", ErrNotSandboxRoute, g.Kind, addr.Kind)
	}
	want := tickets.Expect{SandboxID: addr.SandboxID, Kind: addr.Kind, Permission: RequiredPermissionAt(addr, r)}

	// A ticket in the query wins (it is the freshest credential); then the session cookie; then a bearer ticket.
	// The cookie comes before the bearer so an app's own Authorization header passes through untouched.
	// A spent or stale ticket next to a valid session (a reloaded page still has ?ticket= in its URL) is carried by
	// the session.
	var grant Grant
	if tok, ok := QueryParam(r.URL.RawQuery, TicketParam); ok {
		c, err := g.Verifier.VerifyContext(r.Context(), tok, want)
		if err != nil {
			sc, serr := g.session(r, want)
			if serr != nil {
				return Grant{}, err
			}
			c, grant.Via = sc, "session"
		} else {
			grant.Via = "query"
		}
		grant.Address, grant.Claims = addr, c
	} else if c, err := g.session(r, want); err == nil {
		grant = Grant{Address: addr, Claims: c, Via: "session"}
	} else if tok, ok := bearer(r); ok {
		c, berr := g.Verifier.VerifyContext(r.Context(), tok, want)
		switch {
		case berr == nil:
			grant = Grant{Address: addr, Claims: c, Via: "bearer"}
		case addr.Kind == tickets.KindMCP && g.APIKeys != nil && g.APIKeys.KeyAllows(r.Context(), tok, addr.SandboxID):
			// An MCP client holding an API key reaches its own sandbox's MCP server directly, request after request.
			grant = Grant{Address: addr, Via: "api_key",
				Claims: &tickets.Claims{SandboxID: addr.SandboxID, Kind: addr.Kind, Permission: tickets.PermWrite}}
		default:
			return Grant{}, berr
		}
	} else {
		return Grant{}, err
	}

	stripCredentials(r, grant.Via)
	if (grant.Via == "query" || grant.Via == "bearer") && g.SessionLifetime > 0 {
		if err := g.setSession(w, grant); err != nil {
			return Grant{}, err
		}
	}
	return grant, nil
}

func (g *Gate) session(r *http.Request, want tickets.Expect) (*tickets.Claims, error) {
	var last error = &tickets.Error{Reason: tickets.ReasonMissing}
	if g.SessionLifetime <= 0 {
		return nil, last
	}
	for _, ck := range r.Cookies() {
		if ck.Name != SessionCookie {
			continue
		}
		c, err := g.Verifier.VerifySession(ck.Value, want)
		if err == nil {
			// The cookie is SameSite=Strict, but every app subdomain of the content origin is same-site with the
			// gateway when both share a registrable domain: the browser sends the cookie with a sibling page's
			// requests and WebSockets. Only the page's own origin may use it.
			if !FromOwnOrigin(r) {
				return nil, fmt.Errorf("%w: Origin %q, Sec-Fetch-Site %q on %s", ErrCrossOrigin,
					r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), OwnOrigin(r))
			}
			return c, nil
		}
		last = err
	}
	return nil, last
}

func (g *Gate) setSession(w http.ResponseWriter, grant Grant) error {
	tok, exp, err := g.Verifier.NewSession(grant.Claims, g.SessionLifetime)
	if err != nil {
		return err
	}
	ck := &http.Cookie{
		Name:     SessionCookie,
		Value:    tok,
		Path:     grant.Address.CookiePath(),
		Expires:  exp,
		MaxAge:   int(g.SessionLifetime / time.Second),
		HttpOnly: true,
		Secure:   true,
		SameSite: http.SameSiteStrictMode,
	}
	if err := ck.Valid(); err != nil {
		return fmt.Errorf("building session cookie: %w", err)
	}
	w.Header().Add("Set-Cookie", ck.String())
	return nil
}

func bearer(r *http.Request) (string, bool) {
	a := r.Header.Get("Authorization")
	if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:]), true
	}
	return "", false
}

// stripCredentials removes what the gateway consumed, so neither the agent nor code in the sandbox sees it.
func stripCredentials(r *http.Request, via string) {
	if _, ok := QueryParam(r.URL.RawQuery, TicketParam); ok {
		r.URL.RawQuery = RemoveQueryParam(r.URL.RawQuery, TicketParam)
		r.URL.ForceQuery = false
		r.RequestURI = r.URL.RequestURI()
	}
	if via == "bearer" || via == "api_key" {
		r.Header.Del("Authorization")
	}
	removeCookie(r, SessionCookie)
	for name := range r.Header {
		if strings.HasPrefix(name, GatewayHeaderPrefix) {
			delete(r.Header, name)
		}
	}
}

func removeCookie(r *http.Request, name string) {
	values := r.Header.Values("Cookie")
	if len(values) == 0 {
		return
	}
	var kept []string
	for _, line := range values {
		for _, part := range strings.Split(line, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if k, _, _ := strings.Cut(part, "="); strings.TrimSpace(k) == name {
				continue
			}
			kept = append(kept, part)
		}
	}
	r.Header.Del("Cookie")
	if len(kept) > 0 {
		r.Header.Set("Cookie", strings.Join(kept, "; "))
	}
}

// ErrCrossOrigin refuses a request that presents a valid session cookie from a page of another origin (answer with
// WriteCrossOrigin). A ticket (query or bearer) is an explicit credential and is not subject to it.
var ErrCrossOrigin = errors.New("a session cookie was sent from another origin")

// OwnOrigin is the origin the request was sent to, as Caddy serves it: the scheme of the connection and the Host.
func OwnOrigin(r *http.Request) string {
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host
}

// FromOwnOrigin reports whether a cookie-carrying browser request comes from a page of the origin it is sent to, or
// from no page at all. Browsers that send Sec-Fetch-Site say so directly: "same-origin", or "none" for what the
// user typed, bookmarked or reloaded; "same-site" (a sibling subdomain) and "cross-site" are refused. Browsers
// without fetch metadata send Origin on every WebSocket and every non-GET request, and it must then name this
// origin ("null", a sandboxed document, does not). A request with neither is not from a page (curl, a top-level
// navigation of an old browser) and passes.
func FromOwnOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin" || s == "none"
	}
	origin := r.Header.Get("Origin")
	return origin == "" || origin == OwnOrigin(r)
}

// IsRefusal reports whether err is a refused credential (answer 401) rather than a request that names no route.
func IsRefusal(err error) bool {
	var te *tickets.Error
	return errors.As(err, &te)
}
