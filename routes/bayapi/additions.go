package bayapi

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Our additions to Bay's API, in its style: same auth, envelope, ownership and ensure-running rules.

func (h *Handler) needStreamer(w http.ResponseWriter, r *http.Request) bool {
	if err := h.svc.CanStream(); err != nil {
		writeError(w, r, err)
		return false
	}
	return true
}

// relaySSE copies an event stream to the client, flushing every read so events arrive as they happen.
func relaySSE(w http.ResponseWriter, body io.ReadCloser) {
	defer body.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the client left; closing body stops the agent stream
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

func (h *Handler) execStream(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if !h.needStreamer(w, r) {
		return
	}
	f := bodyFields(r, true)
	command := f.str("command", true, "")
	timeout := f.integer("timeout", defaultExecTimeout, bound(1), bound(86400), false)
	cwd := f.optStr("cwd")
	if !decodeOrFail(w, f) {
		return
	}
	body, err := h.svc.StreamShell(r.Context(), p, r.PathValue("id"), service.ShellParams{Command: command, Cwd: cwd,
		Timeout: time.Duration(timeout) * time.Second})
	if err != nil {
		writeError(w, r, err)
		return
	}
	relaySSE(w, body)
}

func (h *Handler) listProcesses(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if !h.needStreamer(w, r) {
		return
	}
	doc, err := h.svc.Processes(r.Context(), p, r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

var (
	pidPattern    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	cursorPattern = regexp.MustCompile(`^([0-9]+(:[0-9]+)?)?$`)
)

func (h *Handler) processOutput(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if !h.needStreamer(w, r) {
		return
	}
	pid := r.PathValue("pid")
	q := queryFields(r)
	since := q.str("since", false, "")
	if since == "" {
		since = r.Header.Get("Last-Event-ID")
	}
	if !cursorPattern.MatchString(since) {
		q.issue("string_pattern_mismatch", q.loc("since"), "String should match pattern '^([0-9]+(:[0-9]+)?)?$'", since, nil)
	}
	if !pidPattern.MatchString(pid) {
		q.issue("string_pattern_mismatch", []any{"path", "pid"}, "String should match pattern '^[A-Za-z0-9_.-]{1,64}$'", pid, nil)
	}
	if !decodeOrFail(w, q) {
		return
	}
	body, err := h.svc.ProcessOutput(r.Context(), p, r.PathValue("id"), pid, since)
	if err != nil {
		writeError(w, r, err)
		return
	}
	relaySSE(w, body)
}

var signals = []string{"TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT"}

func (h *Handler) signalProcess(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if !h.needStreamer(w, r) {
		return
	}
	pid := r.PathValue("pid")
	f := bodyFields(r, false)
	sig := strings.ToUpper(strings.TrimPrefix(strings.ToUpper(f.str("signal", false, "TERM")), "SIG"))
	valid := false
	for _, s := range signals {
		valid = valid || s == sig
	}
	if !valid {
		f.issue("enum", f.loc("signal"), "Input should be one of "+strings.Join(signals, ", "), sig, nil)
	}
	if !pidPattern.MatchString(pid) {
		f.issue("string_pattern_mismatch", []any{"path", "pid"}, "String should match pattern '^[A-Za-z0-9_.-]{1,64}$'", pid, nil)
	}
	if !decodeOrFail(w, f) {
		return
	}
	if err := h.svc.Signal(r.Context(), p, r.PathValue("id"), pid, sig); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) createPTY(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if !h.needStreamer(w, r) {
		return
	}
	f := bodyFields(r, false)
	req := service.PTYRequest{
		Command: f.str("command", false, ""),
		Cols:    int(f.integer("cols", 120, bound(1), bound(1000), false)),
		Rows:    int(f.integer("rows", 40, bound(1), bound(1000), false)),
	}
	cwd := f.str("cwd", false, "")
	if !decodeOrFail(w, f) {
		return
	}
	doc, err := h.svc.CreatePTY(r.Context(), p, r.PathValue("id"), req, cwd)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, json.RawMessage(doc))
}

func (h *Handler) createTicket(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if h.svc.Tickets() == nil {
		writeError(w, r, service.Errorf(service.CodeCapability, "tickets are not configured on this gateway").
			With("capability", "tickets").With("available", []string{}))
		return
	}
	id := r.PathValue("id")
	f := bodyFields(r, false)
	scope := f.str("scope", false, "app")
	ttl := f.integer("ttl", 60, bound(1), bound(3600), false)
	write := f.str("permission", false, "read")
	if write != "read" && write != "write" {
		f.issue("enum", f.loc("permission"), "Input should be 'read' or 'write'", write, nil)
	}
	valid := false
	for _, s := range service.TicketScopes {
		valid = valid || s == scope
	}
	if !valid {
		f.issue("enum", f.loc("scope"), "Input should be one of "+strings.Join(service.TicketScopes, ", "), scope, nil)
	}
	if !decodeOrFail(w, f) {
		return
	}
	tk, err := h.svc.IssueTicket(r.Context(), p, id, scope, write == "write", time.Duration(ttl)*time.Second)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := map[string]any{"ticket": tk.Ticket, "expires_at": service.ISO(tk.ExpiresAt), "scope": scope, "permission": write}
	if tk.URL != "" {
		out["url"] = tk.URL
	}
	writeJSON(w, http.StatusCreated, out)
}
