package bayapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Exec timeouts (seconds), Bay's bounds.
const (
	defaultExecTimeout = 30
	maxExecTimeout     = 300
	// agentGrace is added to an exec's own timeout for the agent round trip, so the agent's timeout fires first
	// and the caller gets the command's partial result rather than a bare 504.
	agentGrace = 10 * time.Second
)

type execMeta struct {
	includeCode bool
	description *string
	tags        *string
}

func readExecMeta(f *fields) execMeta {
	return execMeta{
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
func (h *Handler) record(sandboxID, execType, code string, success bool, elapsed time.Duration, output, errText string, m execMeta) string {
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

func (h *Handler) pythonExec(w http.ResponseWriter, r *http.Request, p Principal) {
	h.kernelExec(w, r, p, "python", sandboxes.CapPython, h.cfg.Agent.Python)
}

// kernelRun runs code in one of the sandbox's persistent kernels.
type kernelRun func(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)

// kernelExec serves python/exec and node/exec, one body and one answer: code runs in the sandbox's kernel of
// execType (needing capability) and is recorded in the history under execType. A nil run means the gateway's
// agent client cannot run that kernel at all.
func (h *Handler) kernelExec(w http.ResponseWriter, r *http.Request, p Principal, execType, capability string, run kernelRun) {
	id := r.PathValue("id")
	f := bodyFields(r, true)
	code := f.str("code", true, "")
	timeout := f.integer("timeout", defaultExecTimeout, bound(1), bound(maxExecTimeout), false)
	meta := readExecMeta(f)
	if !decodeOrFail(w, f) {
		return
	}
	if run == nil {
		writeError(w, r, errorf(CodeCapability, "this gateway's agent client does not run %s", execType).with("capability", capability).with("available", []string{}))
		return
	}
	t, err := h.running(r.Context(), id, p, capability)
	if err != nil {
		writeError(w, r, err)
		return
	}
	d := time.Duration(timeout) * time.Second
	ctx, cancel := contextWithTimeout(r, d+agentGrace)
	defer cancel()
	start := time.Now()
	res, err := run(ctx, t, PythonRequest{Code: code, Timeout: d})
	elapsed := time.Since(start)
	if err != nil {
		writeError(w, r, err)
		return
	}
	text := res.Stdout
	if res.Result != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += res.Result
	}
	errText := res.Error
	if errText == "" {
		// stderr of a successful cell (warnings) is output, as Jupyter shows it; it is not an error.
		text += res.Stderr
	}
	images := make([]map[string]string, 0, len(res.Images))
	for _, img := range res.Images {
		images = append(images, map[string]string{"image/png": img})
	}
	success := res.Error == ""
	eid := h.record(id, execType, code, success, elapsed, text, errText, meta)
	var codeOut *string
	if meta.includeCode {
		codeOut = &code
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": success,
		"output":  text,
		"error":   emptyToNil(errText),
		"data": map[string]any{
			"execution_count": res.ExecutionCount,
			"output":          map[string]any{"text": text, "images": images},
		},
		"execution_id":      eid,
		"execution_time_ms": elapsed.Milliseconds(),
		"code":              codeOut,
	})
}

// shellTarget is the running sandbox a shell command (exec, exec stream, PTY) goes to, once the command's working
// directory, when given, is checked and cleaned into *dst.
func (h *Handler) shellTarget(ctx context.Context, id string, p Principal, cwd *string, dst *string) (sandboxes.Target, error) {
	if cwd != nil && *cwd != "" {
		c, err := cleanWorkspacePath("cwd", *cwd, true)
		if err != nil {
			return sandboxes.Target{}, err
		}
		*dst = c
	}
	return h.running(ctx, id, p, sandboxes.CapShell)
}

func (h *Handler) shellExec(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("id")
	f := bodyFields(r, true)
	command := f.str("command", true, "")
	timeout := f.integer("timeout", defaultExecTimeout, bound(1), bound(maxExecTimeout), false)
	cwd := f.optStr("cwd")
	meta := readExecMeta(f)
	if !decodeOrFail(w, f) {
		return
	}
	req := ExecRequest{Command: command, Timeout: time.Duration(timeout) * time.Second}
	t, err := h.shellTarget(r.Context(), id, p, cwd, &req.Cwd)
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx, cancel := contextWithTimeout(r, req.Timeout+agentGrace)
	defer cancel()
	start := time.Now()
	res, err := h.cfg.Agent.Exec(ctx, t, req)
	elapsed := time.Since(start)
	if err != nil {
		writeError(w, r, err)
		return
	}
	exit := res.ExitCode
	errText := res.Stderr
	if res.TimedOut {
		exit = -1
		errText = strings.TrimRight("Command timed out\n"+res.Stderr, "\n")
	}
	success := exit == 0 && !res.TimedOut
	eid := h.record(id, "shell", command, success, elapsed, res.Stdout, errText, meta)
	var cmdOut *string
	if meta.includeCode {
		cmdOut = &command
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success":           success,
		"output":            res.Stdout,
		"error":             emptyToNil(errText),
		"exit_code":         exit,
		"execution_id":      eid,
		"execution_time_ms": elapsed.Milliseconds(),
		"command":           cmdOut,
	})
}
