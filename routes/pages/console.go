package pages

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

// DefaultConsoleSessionTTL is how long a console login lasts. Short: the console can delete sandboxes.
const DefaultConsoleSessionTTL = 30 * time.Minute

// ConsoleCookie names the console's session cookie. Its value is a random id of a server-side session; the API
// key itself never leaves the login request.
const ConsoleCookie = "sandgate_console"

// CSRFHeader carries the console session's CSRF token on every state-changing request.
const CSRFHeader = "X-CSRF-Token"

// MaxConsoleSessions bounds the logins kept in memory; the oldest is dropped beyond it.
const MaxConsoleSessions = 10_000

type consoleSession struct {
	id        string
	principal service.Principal
	csrf      string
	expires   time.Time
}

// consoleSessions is the server-side session store. Sessions live in memory: a gateway restart logs people out,
// which for a short-lived admin login is the safe direction.
type consoleSessions struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time
	m   map[string]*consoleSession
}

func newConsoleSessions(ttl time.Duration, now func() time.Time) *consoleSessions {
	return &consoleSessions{ttl: ttl, now: now, m: map[string]*consoleSession{}}
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (s *consoleSessions) create(p service.Principal) (*consoleSession, error) {
	id, err := randomToken()
	if err != nil {
		return nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return nil, err
	}
	cs := &consoleSession{id: id, principal: p, csrf: csrf, expires: s.now().Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
	if len(s.m) >= MaxConsoleSessions {
		var oldest *consoleSession
		for _, c := range s.m {
			if oldest == nil || c.expires.Before(oldest.expires) {
				oldest = c
			}
		}
		delete(s.m, oldest.id)
	}
	s.m[id] = cs
	return cs, nil
}

func (s *consoleSessions) pruneLocked() {
	now := s.now()
	for id, c := range s.m {
		if !now.Before(c.expires) {
			delete(s.m, id)
		}
	}
}

func (s *consoleSessions) get(id string) (*consoleSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.m[id]
	if !ok {
		return nil, false
	}
	if !s.now().Before(c.expires) {
		delete(s.m, id)
		return nil, false
	}
	return c, true
}

func (s *consoleSessions) drop(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// NewStaticKeys is a KeyLookup over the console's own configured keys (the gateway's sandbox_api key ring can be
// used instead); an empty key is refused.
func NewStaticKeys(keys []service.KeyConfig) (*service.KeyRing, error) {
	for i, c := range keys {
		if strings.TrimSpace(c.Key) == "" {
			return nil, fmt.Errorf("console key %d is empty", i+1)
		}
	}
	return service.NewKeyRing(keys)
}

// ConsoleKeys are the keys that may log in to the console: its own (static, each non-empty), then the API's (api,
// nil for none). With neither it is nil, which turns the console off.
func ConsoleKeys(static []service.KeyConfig, api KeyLookup) (KeyLookup, error) {
	var lookups []KeyLookup
	if len(static) > 0 {
		sk, err := NewStaticKeys(static)
		if err != nil {
			return nil, err
		}
		lookups = append(lookups, sk)
	}
	if api != nil {
		lookups = append(lookups, api)
	}
	if len(lookups) == 0 {
		return nil, nil
	}
	return AnyKeys(lookups), nil
}

// serveConsole routes /console/...
func (h *Handler) serveConsole(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Keys == nil {
		setSecurityHeaders(w.Header(), "")
		http.NotFound(w, r)
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/console"), "/")
	if rest == "" && r.URL.Path == "/console" {
		setSecurityHeaders(w.Header(), "")
		http.Redirect(w, r, ConsolePrefix, http.StatusMovedPermanently)
		return
	}
	switch rest {
	case "":
		h.consoleHome(w, r)
		return
	case "login":
		h.consoleLogin(w, r)
		return
	}
	cs, ok := h.consoleSession(r)
	if !ok {
		setSecurityHeaders(w.Header(), "")
		writeError(w, http.StatusUnauthorized, "unauthorized", "log in to the console again")
		return
	}
	if !sandboxroute.FromOwnOrigin(r) {
		// The console cookie is SameSite=Strict, which a sibling subdomain of the same site still receives: its
		// API and event stream answer only the console's own pages, whatever the method.
		setSecurityHeaders(w.Header(), "")
		sandboxroute.WriteCrossOrigin(w, "")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !h.csrfOK(r, cs) {
		setSecurityHeaders(w.Header(), "")
		writeError(w, http.StatusForbidden, "csrf_refused", "missing or wrong CSRF token, or a cross-origin request")
		return
	}
	setSecurityHeaders(w.Header(), "")
	switch {
	case rest == "logout" && r.Method == http.MethodPost:
		h.sessions.drop(cs.id)
		http.SetCookie(w, h.consoleCookie("", -1))
		http.Redirect(w, r, ConsolePrefix, http.StatusSeeOther)
	case rest == "events" && r.Method == http.MethodGet:
		h.consoleEvents(w, r, cs)
	case rest == "api/profiles" && r.Method == http.MethodGet:
		h.consoleProfiles(w, r)
	case rest == "api/sandboxes" && r.Method == http.MethodGet:
		h.consoleList(w, r, cs)
	case rest == "api/sandboxes" && r.Method == http.MethodPost:
		h.consoleCreate(w, r, cs)
	case strings.HasPrefix(rest, "api/sandboxes/"):
		id, action, _ := strings.Cut(strings.TrimPrefix(rest, "api/sandboxes/"), "/")
		h.consoleAction(w, r, cs, id, action)
	default:
		writeCoreError(w, sandboxes.CodeNotFound, "no such console endpoint")
	}
}

func (h *Handler) consoleSession(r *http.Request) (*consoleSession, bool) {
	ck, err := r.Cookie(ConsoleCookie)
	if err != nil || ck.Value == "" {
		return nil, false
	}
	return h.sessions.get(ck.Value)
}

// csrfOK is the double check on console actions: the request comes from our origin, and it carries the session's
// CSRF token (a header for the script's fetches, a form field for the logout form).
func (h *Handler) csrfOK(r *http.Request, cs *consoleSession) bool {
	if !sameOrigin(r) {
		return false
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		r.Body = http.MaxBytesReader(nil, r.Body, 4096)
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(cs.csrf)) == 1
}

func (h *Handler) consoleCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: ConsoleCookie, Value: value, Path: "/console", MaxAge: maxAge,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode}
}

func (h *Handler) consoleHome(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		setSecurityHeaders(w.Header(), "")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	cs, ok := h.consoleSession(r)
	if !ok {
		h.render(w, http.StatusOK, "login.html", nil)
		return
	}
	h.render(w, http.StatusOK, "console.html", map[string]any{
		"CSRF":      cs.csrf,
		"Owner":     cs.principal.Owner,
		"Admin":     cs.principal.Admin,
		"CanOpen":   h.cfg.Issuer != nil,
		"ExpiresAt": cs.expires.UTC().Format(time.RFC3339),
	})
}

func (h *Handler) consoleLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		setSecurityHeaders(w.Header(), "")
		http.Redirect(w, r, ConsolePrefix, http.StatusSeeOther)
		return
	}
	// Login CSRF: a cross-site form could log a victim into the attacker's account.
	if !sameOrigin(r) {
		h.render(w, http.StatusForbidden, "login.html", map[string]any{"Error": "Cross-origin login refused."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8192)
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	p, ok := h.cfg.Keys.Lookup(key)
	if key == "" || !ok {
		h.render(w, http.StatusUnauthorized, "login.html", map[string]any{"Error": "That API key is not valid."})
		return
	}
	cs, err := h.sessions.create(p)
	if err != nil {
		h.renderMessage(w, http.StatusInternalServerError, "Login failed", err.Error())
		return
	}
	setSecurityHeaders(w.Header(), "")
	http.SetCookie(w, h.consoleCookie(cs.id, int(h.cfg.ConsoleSessionTTL/time.Second)))
	http.Redirect(w, r, ConsolePrefix, http.StatusSeeOther)
}

// sandboxView is one row of the console's list.
type sandboxView struct {
	*sandboxes.Sandbox
	Usage *sandboxes.Usage `json:"usage,omitempty"`
}

func (h *Handler) consoleList(w http.ResponseWriter, r *http.Request, cs *consoleSession) {
	list, _, err := h.cfg.Service.ListSandboxes(r.Context(), cs.principal, sandboxes.ListOptions{Limit: 500})
	if err != nil {
		writeLifecycleError(w, err)
		return
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt.After(list[j].CreatedAt) })
	views := make([]sandboxView, 0, len(list))
	var ids []string
	for i := range list {
		sb := &list[i]
		views = append(views, sandboxView{Sandbox: sb})
		if sb.Status == sandboxes.StatusReady {
			ids = append(ids, sb.ID)
		}
	}
	if h.cfg.ShowUsage && len(ids) > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		use := h.cfg.Service.Usage(ctx, ids)
		cancel()
		for i := range views {
			if u, ok := use[views[i].ID]; ok {
				views[i].Usage = &u
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": views, "now": h.cfg.Now().UTC()})
}

type profileView struct {
	ID           string   `json:"id"`
	Description  string   `json:"description,omitempty"`
	Capabilities []string `json:"capabilities"`
	// AppPort says the profile serves an app (the console offers to open it).
	AppPort int `json:"app_port,omitempty"`
	// Runtime is the OCI runtime its sandboxes run under: "runc" (the engine's default, a container on the host's
	// kernel) or "runsc" (gVisor's own kernel, docs/security.md "gVisor"), so an operator choosing for untrusted
	// code sees which profile isolates it.
	Runtime string `json:"runtime"`
}

func (h *Handler) consoleProfiles(w http.ResponseWriter, _ *http.Request) {
	ps := h.cfg.Service.Profiles()
	out := make([]profileView, 0, len(ps))
	for _, p := range ps {
		rt := p.Runtime
		if rt == "" {
			rt = "runc"
		}
		out = append(out, profileView{ID: p.ID, Description: p.Description, Capabilities: p.Capabilities, AppPort: p.AppPort, Runtime: rt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(w, http.StatusOK, map[string]any{"profiles": out})
}

func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return errors.New("send application/json")
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 8192)).Decode(v); err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	return nil
}

func (h *Handler) consoleCreate(w http.ResponseWriter, r *http.Request, cs *consoleSession) {
	var req struct {
		Profile    string `json:"profile"`
		TTLSeconds int    `json:"ttl_seconds"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeCoreError(w, sandboxes.CodeInvalid, err.Error())
		return
	}
	if req.Profile == "" || req.TTLSeconds < 0 {
		writeCoreError(w, sandboxes.CodeInvalid, "choose a profile; ttl_seconds must not be negative")
		return
	}
	sb, err := h.cfg.Service.Create(r.Context(), cs.principal, sandboxes.CreateRequest{Profile: req.Profile,
		TTL: time.Duration(req.TTLSeconds) * time.Second})
	if err != nil {
		writeLifecycleError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sandboxView{Sandbox: &sb})
}

// consoleAction runs stop, pause, resume, extend, open and delete on one sandbox the session may see.
func (h *Handler) consoleAction(w http.ResponseWriter, r *http.Request, cs *consoleSession, id, action string) {
	if !sandboxroute.ValidSandboxID(id) {
		writeCoreError(w, sandboxes.CodeNotFound, "no such sandbox")
		return
	}
	sb, err := h.cfg.Service.Visible(r.Context(), cs.principal, id)
	if err != nil {
		// Someone else's sandbox is reported exactly like a missing one.
		writeCoreError(w, sandboxes.CodeNotFound, "no such sandbox")
		return
	}
	switch {
	case action == "" && r.Method == http.MethodDelete:
		if err := h.cfg.Service.Delete(r.Context(), cs.principal, id); err != nil {
			writeLifecycleError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case action == "stop" && r.Method == http.MethodPost:
		if err := h.cfg.Service.StopSandbox(r.Context(), cs.principal, id); err != nil {
			writeLifecycleError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case (action == "pause" || action == "resume") && r.Method == http.MethodPost:
		h.consolePause(w, r, cs, id, action == "pause") // console_pause.go
	case action == "extend" && r.Method == http.MethodPost:
		var req struct {
			Seconds int `json:"seconds"`
		}
		if err := decodeJSON(r, &req); err != nil || req.Seconds <= 0 {
			writeCoreError(w, sandboxes.CodeInvalid, "body must be {\"seconds\": N} with N > 0")
			return
		}
		sb, err := h.cfg.Service.ExtendTTL(r.Context(), cs.principal, id, time.Duration(req.Seconds)*time.Second)
		if err != nil {
			writeLifecycleError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, sandboxView{Sandbox: &sb})
	case action == "open" && r.Method == http.MethodPost:
		h.consoleOpen(w, r, cs, &sb)
	default:
		writeCoreError(w, sandboxes.CodeNotFound, "no such action")
	}
}

// consoleOpen mints a one-time ticket and returns the URL that spends it. The ticket reaches the browser only
// inside this same-origin JSON answer, and the page it opens trades it for a path-scoped cookie at once.
func (h *Handler) consoleOpen(w http.ResponseWriter, r *http.Request, cs *consoleSession, sb *sandboxes.Sandbox) {
	if h.cfg.Issuer == nil {
		writeCoreError(w, sandboxes.CodeNotFound, "opening pages is not configured (no ticket secret)")
		return
	}
	var req struct {
		Kind     string `json:"kind"`
		ReadOnly bool   `json:"read_only"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeCoreError(w, sandboxes.CodeInvalid, err.Error())
		return
	}
	var kind tickets.Kind
	switch req.Kind {
	case "terminal":
		kind = tickets.KindTerminal
	case "desktop":
		kind = tickets.KindVNC
	case "app":
		kind = tickets.KindApp
	default:
		writeCoreError(w, sandboxes.CodeInvalid, "kind must be terminal, desktop or app")
		return
	}
	perm := tickets.PermWrite
	if req.ReadOnly {
		perm = tickets.PermRead
	}
	t, err := h.cfg.Issuer.Issue(tickets.IssueRequest{SandboxID: sb.ID, Kind: kind, Permission: perm,
		Lifetime: h.cfg.TicketLifetime, Subject: cs.principal.Owner})
	var limited *tickets.RateLimitedError
	if errors.As(err, &limited) {
		w.Header().Set("Retry-After", strconv.Itoa(int((limited.RetryAfter+time.Second-1)/time.Second)))
		writeError(w, http.StatusTooManyRequests, "rate_limited", err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "ticket_failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"url":        h.cfg.URLs.Ticket(sb.ID, kind, t.Token),
		"expires_at": t.ExpiresAt,
	})
}

// consoleEvents streams lifecycle events the session may see as Server-Sent Events. The stream ends when the
// client leaves, the login expires or the handler is closed (config unload), so it never holds a reload.
func (h *Handler) consoleEvents(w http.ResponseWriter, r *http.Request, cs *consoleSession) {
	rc := http.NewResponseController(w)
	events, cancel := h.cfg.Service.Subscribe(cs.principal, 64) // only what the session may see
	defer cancel()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "retry: 2000\n\n")
	_ = rc.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	expiry := time.NewTimer(cs.expires.Sub(h.cfg.Now()))
	defer expiry.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case <-expiry.C:
			_, _ = io.WriteString(w, "event: logout\ndata: {}\n\n")
			_ = rc.Flush()
			return
		case <-keepalive.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			data, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, data); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// AnyKeys is a KeyLookup over several: the first that knows a key answers.
type AnyKeys []KeyLookup

// Lookup asks each lookup in turn.
func (a AnyKeys) Lookup(key string) (service.Principal, bool) {
	for _, l := range a {
		if p, ok := l.Lookup(key); ok {
			return p, true
		}
	}
	return service.Principal{}, false
}
