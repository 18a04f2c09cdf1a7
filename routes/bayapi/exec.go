package bayapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Exec timeouts (seconds), Bay's bounds.
const (
	defaultExecTimeout = 30
	maxExecTimeout     = 300
	// agentGrace is added to an exec's own timeout for the agent round trip, so the agent's timeout fires first
	// and the caller gets the command's partial result rather than a bare 504.
	agentGrace = 10 * time.Second
)

// ExecMeta is what a caller may attach to an execution in the history (REST: include_code, description, tags).
type ExecMeta struct {
	includeCode bool
	description *string
	tags        *string
}

func readExecMeta(f *fields) ExecMeta {
	return ExecMeta{
		includeCode: f.boolean("include_code", false),
		description: f.optStr("description"),
		tags:        f.optStr("tags"),
	}
}

func strPtr(s string) *string { return &s }

// emptyToNil gives Bay's null for an empty error/output field.
func emptyToNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// record stores an execution in the history; a failure to record is logged, never fails the call.
func (h *Handler) record(sandboxID, execType, code string, success bool, elapsed time.Duration, output, errText string, m ExecMeta) string {
	e := &HistoryEntry{
		ID: newID("exec-"), SandboxID: sandboxID, ExecType: execType, Code: code, Success: success,
		ExecutionTimeMS: elapsed.Milliseconds(), Output: strPtr(output), Error: emptyToNil(errText),
		Description: m.description, Tags: m.tags, CreatedAt: h.cfg.Now().UTC(),
	}
	if err := h.cfg.Store.AddHistory(e); err != nil { // queued; stored in the background
		h.cfg.Logger.Warn("recording execution history", "sandbox", sandboxID, "error", err)
	}
	return e.ID
}

func (h *Handler) pythonExec(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.kernelExec(w, r, p, LangPython)
}

// kernelRun runs code in one of the sandbox's persistent kernels.
type kernelRun func(ctx context.Context, t sandboxes.Target, req service.PythonRequest) (service.PythonResult, error)

// kernelExec serves python/exec and node/exec, one body and one answer: RunKernel runs the code in the sandbox's
// kernel of lang and records it in the history.
func (h *Handler) kernelExec(w http.ResponseWriter, r *http.Request, p service.Principal, lang string) {
	id := r.PathValue("id")
	f := bodyFields(r, true)
	code := f.str("code", true, "")
	timeout := f.integer("timeout", defaultExecTimeout, bound(1), bound(maxExecTimeout), false)
	meta := readExecMeta(f)
	if !decodeOrFail(w, f) {
		return
	}
	res, err := h.RunKernel(r.Context(), p, id, lang, code, time.Duration(timeout)*time.Second, meta)
	if err != nil {
		writeError(w, r, err)
		return
	}
	images := make([]map[string]string, 0, len(res.Images))
	for _, img := range res.Images {
		images = append(images, map[string]string{"image/png": img})
	}
	var codeOut *string
	if meta.includeCode {
		codeOut = &code
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": res.Success,
		"output":  res.Text,
		"error":   emptyToNil(res.Error),
		"data": map[string]any{
			"execution_count": res.ExecutionCount,
			"output":          map[string]any{"text": res.Text, "images": images},
		},
		"execution_id":      res.ExecutionID,
		"execution_time_ms": res.Elapsed.Milliseconds(),
		"code":              codeOut,
		"truncated":         res.Truncated, // our addition: the output was cut
	})
}

// shellTarget is the running sandbox a shell command (exec, exec stream, PTY) goes to, once the command's working
// directory, when given, is checked and cleaned into *dst.
func (h *Handler) shellTarget(ctx context.Context, id string, p service.Principal, cwd *string, dst *string) (sandboxes.Target, error) {
	if cwd != nil && *cwd != "" {
		c, err := cleanWorkspacePath("cwd", *cwd, true)
		if err != nil {
			return sandboxes.Target{}, err
		}
		*dst = c
	}
	return h.running(ctx, id, p, sandboxes.CapShell)
}

func (h *Handler) shellExec(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	f := bodyFields(r, true)
	command := f.str("command", true, "")
	timeout := f.integer("timeout", defaultExecTimeout, bound(1), bound(maxExecTimeout), false)
	cwd := f.optStr("cwd")
	meta := readExecMeta(f)
	if !decodeOrFail(w, f) {
		return
	}
	res, err := h.RunShell(r.Context(), p, id, ShellParams{Command: command, Cwd: cwd, Timeout: time.Duration(timeout) * time.Second}, meta)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var cmdOut *string
	if meta.includeCode {
		cmdOut = &command
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success":           res.Success,
		"output":            res.Stdout,
		"error":             emptyToNil(res.Error),
		"exit_code":         res.ExitCode,
		"execution_id":      res.ExecutionID,
		"execution_time_ms": res.Elapsed.Milliseconds(),
		"command":           cmdOut,
		"truncated":         res.Truncated, // our addition: the output was cut
	})
}
