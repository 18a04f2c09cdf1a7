package pages

import (
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

// TicketIssuer mints the tickets the console's open buttons put in URLs (*tickets.Issuer).
type TicketIssuer interface {
	Issue(req tickets.IssueRequest) (tickets.Ticket, error)
}

// KeyLookup resolves an API key to its principal (*service.KeyRing, or StaticKeys).
type KeyLookup interface {
	Lookup(key string) (service.Principal, bool)
}

// Config is what a Handler is built from.
type Config struct {
	// Verifier checks the tickets and session cookies of the terminal and desktop pages (the edge's verifier, so
	// the session cookie a page sets also admits its WebSockets at sandbox_ticket).
	Verifier *tickets.Verifier
	// Service is the one road into the core (lifecycle, owner checks, the terminal's PTY sessions); required.
	Service *service.Service
	// Issuer mints tickets for the console's open buttons; nil hides them.
	Issuer TicketIssuer
	// Keys turns on the console; nil answers it with 404.
	Keys KeyLookup
	// ShowUsage adds CPU and memory to the console's list (the service's Usage, from the Manager's engine).
	ShowUsage bool
	// URLs say where the console's open buttons go: apps to the content origin when URLs.Content is set.
	URLs tickets.URLs
	// BaseDomains are the edge's subdomain bases (so a page request under them is not mistaken for a path route).
	BaseDomains []string
	// PageSessionLifetime is the lifetime of the session cookie a page ticket buys; 0 means tickets.DefaultSessionLifetime.
	PageSessionLifetime time.Duration
	// ConsoleSessionTTL is how long a console login lasts; 0 means DefaultConsoleSessionTTL.
	ConsoleSessionTTL time.Duration
	// TicketLifetime of the tickets the console mints; 0 means the issuer's default.
	TicketLifetime time.Duration
	// Assets overrides the embedded files (tests); nil means the embedded ones.
	Assets fs.FS
	Now    func() time.Time
}

// Paths of the pages outside /sandboxes/.
const (
	AssetsPrefix  = "/_sandgate/"
	ConsolePrefix = "/console/"
)

// DefaultAgentTimeout bounds one call to an agent from a page endpoint (the Caddy glue gives the service's agent
// client this timeout).
const DefaultAgentTimeout = 30 * time.Second

// Handler serves the pages. It is safe for concurrent use.
type Handler struct {
	cfg       Config
	assets    *Assets
	templates *template.Template
	gate      *sandboxroute.Gate
	sessions  *consoleSessions
	closeOnce sync.Once
	done      chan struct{}
}

// New checks cfg and builds the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil {
		return nil, errors.New("pages: the sandboxes service is required")
	}
	if cfg.Verifier == nil {
		return nil, errors.New("pages: a ticket verifier is required (set the ticket secret)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PageSessionLifetime <= 0 {
		cfg.PageSessionLifetime = tickets.DefaultSessionLifetime
	}
	if cfg.ConsoleSessionTTL <= 0 {
		cfg.ConsoleSessionTTL = DefaultConsoleSessionTTL
	}
	assets, err := NewAssets(cfg.Assets)
	if err != nil {
		return nil, fmt.Errorf("pages: opening assets: %w", err)
	}
	tfs, err := fs.Sub(web, "web/templates")
	if err != nil {
		return nil, fmt.Errorf("pages: opening templates: %w", err)
	}
	tmpl, err := template.ParseFS(tfs, "*.html")
	if err != nil {
		return nil, fmt.Errorf("pages: parsing templates: %w", err)
	}
	return &Handler{
		cfg:       cfg,
		assets:    assets,
		templates: tmpl,
		gate:      &sandboxroute.Gate{Verifier: cfg.Verifier, BaseDomains: cfg.BaseDomains, SessionLifetime: cfg.PageSessionLifetime},
		sessions:  newConsoleSessions(cfg.ConsoleSessionTTL, cfg.Now),
		done:      make(chan struct{}),
	}, nil
}

// Close ends the console's live streams (on config unload) and forgets console logins.
func (h *Handler) Close() {
	h.closeOnce.Do(func() { close(h.done) })
}

// Handles reports whether r is for one of the pages; everything else (the terminal and desktop WebSockets, app
// routes, the API) belongs to the next handler.
func (h *Handler) Handles(r *http.Request) bool {
	p := r.URL.Path
	if strings.HasPrefix(p, AssetsPrefix) || p == "/console" || strings.HasPrefix(p, ConsolePrefix) {
		return true
	}
	_, ok := pageOf(r)
	return ok
}

// page is a sandbox page request.
type page struct {
	addr sandboxroute.Address
	// what: "terminal", "session" (the terminal's PTY endpoint) or "desktop".
	what string
}

func pageOf(r *http.Request) (page, bool) {
	if !strings.HasPrefix(r.URL.Path, sandboxroute.PathPrefix) {
		return page{}, false
	}
	addr, err := sandboxroute.ParsePath(r.URL.EscapedPath())
	if err != nil {
		return page{}, false
	}
	switch {
	case addr.Kind == tickets.KindTerminal && addr.Rest == "/":
		return page{addr, "terminal"}, true
	case addr.Kind == tickets.KindTerminal && addr.Rest == "/session":
		return page{addr, "session"}, true
	case addr.Kind == tickets.KindVNC && addr.Rest == "/":
		return page{addr, "desktop"}, true
	}
	return page{}, false
}

// ServeHTTP serves a request for which Handles is true; anything else gets 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, AssetsPrefix):
		h.assets.serve(w, r, strings.TrimPrefix(p, AssetsPrefix))
	case p == "/console" || strings.HasPrefix(p, ConsolePrefix):
		h.serveConsole(w, r)
	default:
		pg, ok := pageOf(r)
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.serveSandboxPage(w, r, pg)
	}
}

// render writes a template with the security headers and a fresh style nonce.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data map[string]any) {
	nonce, err := newNonce()
	if err != nil {
		http.Error(w, "cannot make a page nonce", http.StatusInternalServerError)
		return
	}
	if data == nil {
		data = map[string]any{}
	}
	data["Nonce"] = nonce
	data["Assets"] = AssetsPrefix
	var b strings.Builder
	if err := h.templates.ExecuteTemplate(&b, name, data); err != nil {
		setSecurityHeaders(w.Header(), "")
		http.Error(w, "rendering page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	setSecurityHeaders(hd, nonce)
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String())) // the client went away; nothing to do
}

// renderMessage answers with the plain message page (errors a person reads).
func (h *Handler) renderMessage(w http.ResponseWriter, status int, title, message string) {
	h.render(w, status, "message.html", map[string]any{"Title": title, "Message": message})
}

// sameOrigin reports whether a state-changing request comes from our own pages. Browsers that send
// Sec-Fetch-Site say so directly ("same-origin"); with Referrer-Policy no-referrer, Chromium sends "Origin: null"
// on form posts, so the Origin header decides only for browsers without Sec-Fetch-Site, and must then name this
// host. Together with SameSite=Strict cookies (and the CSRF token on console actions) this refuses cross-site
// requests even from browsers that ignore one of the mechanisms.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		// Not a browser page (browsers send Origin on every POST, PUT, DELETE); the CSRF token still applies.
		return true
	}
	return origin == sandboxroute.OwnOrigin(r)
}
