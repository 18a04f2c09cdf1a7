package pages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

// serveSandboxPage admits a terminal or desktop request with its ticket or session cookie and serves it.
func (h *Handler) serveSandboxPage(w http.ResponseWriter, r *http.Request, pg page) {
	grant, err := h.gate.Authorize(w, r)
	if err != nil {
		if errors.Is(err, tickets.ErrUnavailable) {
			// Fail closed but say so: the ticket is unspent and the same link works once the store answers.
			w.Header().Set("Retry-After", "1")
			h.renderMessage(w, http.StatusServiceUnavailable, "Try again",
				"This link's ticket could not be checked just now. Reload the page in a moment.")
			return
		}
		if errors.Is(err, sandboxroute.ErrCrossOrigin) {
			// A sibling page (an app subdomain) sent the user's session cookie: the terminal and desktop pages
			// and their session API answer only their own origin.
			setSecurityHeaders(w.Header(), "")
			sandboxroute.WriteCrossOrigin(w, "")
			return
		}
		if sandboxroute.IsRefusal(err) {
			h.refuse(w, r, pg)
			return
		}
		http.NotFound(w, r)
		return
	}
	if pg.what == "session" {
		h.serveTerminalSession(w, r, pg, grant)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		setSecurityHeaders(w.Header(), "")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if grant.Via == "query" {
		// The ticket is spent and the session cookie is set: load the page again without it, so the ticket stays
		// out of the history, bookmarks and anything the page's scripts could read.
		target := pg.addr.Prefix + "/"
		if q := sandboxroute.RemoveQueryParam(r.URL.RawQuery, sandboxroute.TicketParam); q != "" {
			target += "?" + q
		}
		setSecurityHeaders(w.Header(), "")
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, target, http.StatusSeeOther)
		return
	}
	need := terminalVendor
	tmpl := "terminal.html"
	if pg.what == "desktop" {
		need, tmpl = desktopVendor, "desktop.html"
	}
	if missing := h.assets.Missing(need); missing != "" {
		w.Header().Set("Retry-After", "60")
		h.renderMessage(w, http.StatusServiceUnavailable, "Assets not built", assetsNotBuilt+" (missing "+missing+")")
		return
	}
	h.render(w, http.StatusOK, tmpl, map[string]any{
		"SandboxID":  pg.addr.SandboxID,
		"Base":       pg.addr.Prefix + "/",
		"Permission": string(grant.Claims.Permission),
	})
}

// refuse answers a request whose ticket or session is missing, spent or expired. A person gets a page saying what
// to do; the terminal script's probe gets the JSON envelope (401) it turns into the same message.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, pg page) {
	if pg.what == "session" {
		setSecurityHeaders(w.Header(), "")
		sandboxroute.WriteUnauthorized(w, "")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="sandgate"`)
	h.renderMessage(w, http.StatusUnauthorized, "Ticket expired",
		"This link's ticket has expired or was already used. Open the "+pageName(pg)+" again from the console or ask for a new ticket.")
}

func pageName(pg page) string {
	if pg.addr.Kind == tickets.KindVNC {
		return "desktop"
	}
	return "terminal"
}

// sessionReply is the terminal script's view of a PTY session.
type sessionReply struct {
	PTY      string `json:"pty"`
	Offset   int64  `json:"offset"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Cols     uint16 `json:"cols"`
	Rows     uint16 `json:"rows"`
	// WebSocket is the stream's path on this origin.
	WebSocket string `json:"ws"`
}

type sessionRequest struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// serveTerminalSession creates a PTY session (POST) or reports one (GET ?pty=), through the sandbox's agent.
// GET is also the terminal's probe after a dropped connection: 401 means the session cookie expired, 503 with
// details.recovering that the sandbox died and is being rebuilt (the page says so and retries), 410 container_died
// that it died past its crash limit, 404 that the PTY ended.
func (h *Handler) serveTerminalSession(w http.ResponseWriter, r *http.Request, pg page, grant sandboxroute.Grant) {
	setSecurityHeaders(w.Header(), "")
	w.Header().Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		// The gate already required a write ticket. The session cookie is SameSite=Strict; the origin check and
		// the JSON content type (which a cross-site form cannot send without a preflight) close the rest.
		if !sameOrigin(r) {
			writeError(w, http.StatusForbidden, "csrf_refused", "cross-origin request refused")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "validation_error", "send application/json")
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET or POST")
		return
	}
	id := pg.addr.SandboxID
	ctx, cancel := context.WithTimeout(r.Context(), sandboxroute.DefaultStartTimeout)
	defer cancel()
	// The ticket is the authority here: the service leases the sandbox for this request, starts it, and makes the
	// agent calls (the idle collector never stops a container this request holds).
	agent, err := h.cfg.Service.HoldGranted(ctx, id, 0)
	if err != nil {
		writeLifecycleError(w, err)
		return
	}
	ws := pg.addr.Prefix + "/ws?pty="

	if r.Method == http.MethodGet {
		ptyID := r.URL.Query().Get("pty")
		if !sandboxroute.ValidSandboxID(ptyID) {
			writeCoreError(w, sandboxes.CodeInvalid, "name a PTY session with ?pty=")
			return
		}
		list, err := agent.PTYSessions(ctx)
		if err != nil {
			h.agentFailed(ctx, w, agent, fmt.Errorf("listing PTY sessions: %w", err))
			return
		}
		for _, s := range list {
			if s.ID == ptyID {
				writeJSON(w, http.StatusOK, replyOf(s, ws))
				return
			}
		}
		writeError(w, http.StatusNotFound, "pty_not_found", "the terminal session ended; a new one can be started")
		return
	}

	var req sessionRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeCoreError(w, sandboxes.CodeInvalid, "body must be {\"cols\":N,\"rows\":N}: "+err.Error())
		return
	}
	if req.Cols > 1000 || req.Rows > 1000 {
		writeCoreError(w, sandboxes.CodeInvalid, "cols and rows must be at most 1000")
		return
	}
	s, err := agent.OpenPTY(ctx, agentapi.PTYCreateRequest{Cols: req.Cols, Rows: req.Rows,
		Env: map[string]string{"TERM": "xterm-256color"}})
	if err != nil {
		h.agentFailed(ctx, w, agent, fmt.Errorf("creating a PTY session: %w", err))
		return
	}
	writeJSON(w, http.StatusCreated, replyOf(s, ws))
}

func replyOf(s agentapi.PTYSession, ws string) sessionReply {
	return sessionReply{PTY: s.ID, Offset: s.Offset, Status: s.Status, ExitCode: s.ExitCode, Cols: s.Cols, Rows: s.Rows,
		WebSocket: ws + url.QueryEscape(s.ID)}
}

// agentFailed answers an agent call that failed: with the agent's own typed error when it sent one, with the
// lifecycle's view (container_died and its reason) when the sandbox is no longer running, else 502.
func (h *Handler) agentFailed(ctx context.Context, w http.ResponseWriter, held *service.Session, err error) {
	var ae *agentapi.Error
	if errors.As(err, &ae) {
		writeError(w, ae.Status(), ae.Code, ae.Message)
		return
	}
	if sb, gerr := held.Sandbox(ctx); gerr == nil && sb.Died != nil {
		if sb.Status == sandboxes.StatusFailed {
			// Past its crash limit: it stays dead.
			writeLifecycleError(w, &sandboxes.Error{Code: sandboxes.CodeContainerDied,
				Message: "the sandbox's container died: " + sb.Died.Message, Details: map[string]any{"reason": sb.Died.Reason}})
			return
		}
		// Its next use rebuilds it on the same workspace: the page says why its session went away and retries.
		writeLifecycleError(w, &sandboxes.Error{Code: sandboxes.CodeNotReady,
			Message: "the sandbox's container died: " + sb.Died.Message + "; it is rebuilt on its next use",
			Details: map[string]any{"reason": sb.Died.Reason, "recovering": true}})
		return
	}
	writeLifecycleError(w, err) // not the lifecycle's: 502 sandbox_unavailable (504 after a deadline)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // nothing more to tell a client we cannot write to
}
