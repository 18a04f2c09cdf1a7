package bayapi

import (
	"net/http"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Exec timeouts (seconds), Bay's bounds.
const (
	defaultExecTimeout = 30
	maxExecTimeout     = 300
)

// execMeta is what a caller attaches to an execution: the history's description and tags, and include_code.
type execMeta struct {
	service.ExecMeta
	includeCode bool
}

func readExecMeta(f *fields) execMeta {
	return execMeta{
		includeCode: f.boolean("include_code", false),
		ExecMeta:    service.ExecMeta{Description: f.optStr("description"), Tags: f.optStr("tags")},
	}
}

func (h *Handler) pythonExec(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.kernelExec(w, r, p, service.LangPython)
}

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
	res, err := h.svc.RunKernel(r.Context(), p, id, lang, code, time.Duration(timeout)*time.Second, meta.ExecMeta)
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
		"error":   service.EmptyToNil(res.Error),
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
	res, err := h.svc.RunShell(r.Context(), p, id, service.ShellParams{Command: command, Cwd: cwd, Timeout: time.Duration(timeout) * time.Second}, meta.ExecMeta)
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
		"error":             service.EmptyToNil(res.Error),
		"exit_code":         res.ExitCode,
		"execution_id":      res.ExecutionID,
		"execution_time_ms": res.Elapsed.Milliseconds(),
		"command":           cmdOut,
		"truncated":         res.Truncated, // our addition: the output was cut
	})
}
