package bayapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Browser commands follow agent-browser's syntax (Gull passes `cmd` to it), mapped onto the agent's browser
// capability. The supported subset:
//
//	open|goto|navigate <url>   load a page; prints the final URL
//	get text                   the page's visible text (document.body.innerText)
//	get title | get url        the page's title or URL
//	eval <js>                  evaluate a JavaScript expression; prints the JSON result
//	screenshot [path]          PNG into the workspace (default screenshots/screenshot-<unix ms>.png); prints the path
//
// Anything else answers exit_code 127 with a message naming the supported commands, like a missing binary would.
const browserUsage = "supported browser commands: open|goto|navigate <url>, get text, get title, get url, eval <js>, screenshot [path]"

const exitUnsupported = 127

type browserStep struct {
	stdout, stderr string
	exit           int
}

// runBrowserCommand runs one agent-browser style command; errors of the agent become a non-zero step, except
// lifecycle errors, which the caller reports as API errors.
func (h *Handler) runBrowserCommand(ctx context.Context, b *service.BrowserSession, cmd string, timeout time.Duration) (browserStep, error) {
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return browserStep{stderr: "empty command; " + browserUsage, exit: exitUnsupported}, nil
	}
	verb := strings.ToLower(fields[0])
	rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cmd), fields[0]))
	var req service.BrowserRequest
	req.Timeout = timeout
	var screenshotPath string
	switch {
	case verb == "open" || verb == "goto" || verb == "navigate":
		if rest == "" {
			return browserStep{stderr: verb + " needs a URL", exit: 1}, nil
		}
		url := rest
		if !strings.Contains(url, "://") && !strings.HasPrefix(url, "about:") && !strings.HasPrefix(url, "data:") {
			url = "https://" + url
		}
		req.Action, req.URL = "navigate", url
	case verb == "get" && len(fields) == 2 && strings.EqualFold(fields[1], "text"):
		req.Action = "text"
	case verb == "get" && len(fields) == 2 && strings.EqualFold(fields[1], "title"):
		req.Action = "title"
	case verb == "get" && len(fields) == 2 && strings.EqualFold(fields[1], "url"):
		req.Action = "url"
	case verb == "eval":
		if rest == "" {
			return browserStep{stderr: "eval needs a JavaScript expression", exit: 1}, nil
		}
		req.Action, req.Script = "evaluate", rest
	case verb == "screenshot":
		req.Action = "screenshot"
		screenshotPath = fmt.Sprintf("screenshots/screenshot-%d.png", h.cfg.Now().UnixMilli())
		for _, a := range fields[1:] {
			if !strings.HasPrefix(a, "-") {
				screenshotPath = strings.TrimPrefix(a, service.WorkspaceRoot+"/")
			}
		}
		c, err := service.CleanWorkspacePath("path", screenshotPath, false)
		if err != nil {
			return browserStep{stderr: err.Error(), exit: 1}, nil
		}
		screenshotPath = c
	default:
		return browserStep{stderr: fmt.Sprintf("unsupported browser command %q; %s", cmd, browserUsage), exit: exitUnsupported}, nil
	}
	res, err := b.Do(ctx, req)
	if err != nil {
		e := service.AsError(err)
		if e.Code == service.CodeSandboxExpired || e.Code == service.CodeNotFound || e.Code == service.CodeSessionNotReady {
			return browserStep{}, err
		}
		return browserStep{stderr: e.Message, exit: 1}, nil
	}
	if req.Action == "screenshot" {
		if err := b.Save(ctx, screenshotPath, res.PNG); err != nil {
			return browserStep{stderr: "saving the screenshot: " + service.AsError(err).Message, exit: 1}, nil
		}
		return browserStep{stdout: "Screenshot saved to " + service.WorkspaceRoot + "/" + screenshotPath + "\n"}, nil
	}
	out := res.Value
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return browserStep{stdout: out}, nil
}

func (h *Handler) browserExec(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	f := bodyFields(r, true)
	cmd := f.str("cmd", true, "")
	timeout := f.integer("timeout", defaultExecTimeout, bound(1), bound(maxExecTimeout), false)
	ev := readBrowserEvidence(f)
	if !decodeOrFail(w, f) {
		return
	}
	b, err := h.svc.OpenBrowser(r.Context(), p, id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	d := time.Duration(timeout) * time.Second
	ctx, cancel := contextWithTimeout(r, d+service.AgentGrace)
	defer cancel()
	start := time.Now()
	step, err := h.runBrowserCommand(ctx, b, cmd, d)
	elapsed := time.Since(start)
	if err != nil {
		writeError(w, r, err)
		return
	}
	eid, ref := h.svc.RecordBrowser(r.Context(), id, service.BrowserRun{Commands: []string{cmd},
		Steps: []service.BrowserStep{{Cmd: cmd, Stdout: step.stdout, Stderr: step.stderr, ExitCode: step.exit}}, Success: step.exit == 0, Elapsed: elapsed}, ev)
	writeJSON(w, http.StatusOK, map[string]any{
		"success":           step.exit == 0,
		"output":            step.stdout,
		"error":             service.EmptyToNil(step.stderr),
		"exit_code":         step.exit,
		"execution_id":      eid,
		"execution_time_ms": elapsed.Milliseconds(),
		"trace_ref":         ref,
	})
}

// readBrowserEvidence reads Bay's description, tags, learn and include_trace of a browser exec or exec_batch.
func readBrowserEvidence(f *fields) service.BrowserEvidence {
	return service.BrowserEvidence{ExecMeta: readExecMeta(f).ExecMeta, Learn: f.boolean("learn", false), IncludeTrace: f.boolean("include_trace", false)}
}

func (h *Handler) browserBatch(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	f := bodyFields(r, true)
	commands := f.strList("commands", 1)
	timeout := f.integer("timeout", 60, bound(1), bound(600), false)
	stopOnError := f.boolean("stop_on_error", true)
	ev := readBrowserEvidence(f)
	if !decodeOrFail(w, f) {
		return
	}
	b, err := h.svc.OpenBrowser(r.Context(), p, id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out, err := h.runBrowserBatch(r, b, commands, timeout, stopOnError)
	if err != nil {
		writeError(w, r, err)
		return
	}
	eid, ref := h.svc.RecordBrowser(r.Context(), id, service.BrowserRun{Batch: true, Commands: commands, Steps: out.steps, Success: out.success, Elapsed: out.elapsed}, ev)
	writeJSON(w, http.StatusOK, map[string]any{
		"results":           out.results,
		"total_steps":       len(commands),
		"completed_steps":   len(out.results),
		"success":           out.success,
		"duration_ms":       out.elapsed.Milliseconds(),
		"execution_id":      eid,
		"execution_time_ms": out.elapsed.Milliseconds(),
		"trace_ref":         ref,
	})
}

// batchOutcome is what running a batch of browser commands gave: Bay's results, the steps to record, whether every
// step ran and exited 0, and how long the batch took.
type batchOutcome struct {
	results []map[string]any
	steps   []service.BrowserStep
	success bool
	elapsed time.Duration
}

// runBrowserBatch runs commands in order within timeout seconds in all (exec_batch and a browser skill's run): a
// command the budget does not reach answers exit 124 "batch timeout exceeded" and ends the batch, a failing one ends
// it when stopOnError. A lifecycle error of the agent is returned for the caller to answer as an API error.
func (h *Handler) runBrowserBatch(r *http.Request, b *service.BrowserSession, commands []string, timeout int64, stopOnError bool) (batchOutcome, error) {
	budget := time.Duration(timeout) * time.Second
	ctx, cancel := contextWithTimeout(r, budget+service.AgentGrace)
	defer cancel()
	start := time.Now()
	deadline := start.Add(budget)
	out := batchOutcome{results: []map[string]any{}, success: true}
	for i, cmd := range commands {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			out.results = append(out.results, map[string]any{"cmd": cmd, "stdout": "", "stderr": "batch timeout exceeded", "exit_code": 124, "step_index": i, "duration_ms": 0})
			zero := int64(0)
			out.steps = append(out.steps, service.BrowserStep{Cmd: cmd, Stderr: "batch timeout exceeded", ExitCode: 124, DurationMS: &zero})
			out.success = false
			break
		}
		stepStart := time.Now()
		step, err := h.runBrowserCommand(ctx, b, cmd, remaining)
		if err != nil {
			return batchOutcome{}, err
		}
		ms := time.Since(stepStart).Milliseconds()
		out.results = append(out.results, map[string]any{
			"cmd": cmd, "stdout": step.stdout, "stderr": step.stderr, "exit_code": step.exit, "step_index": i, "duration_ms": ms,
		})
		out.steps = append(out.steps, service.BrowserStep{Cmd: cmd, Stdout: step.stdout, Stderr: step.stderr, ExitCode: step.exit, DurationMS: &ms})
		if step.exit != 0 {
			out.success = false
			if stopOnError {
				break
			}
		}
	}
	out.elapsed = time.Since(start)
	return out, nil
}

// browserTrace serves Bay's GET S/browser/traces/{ref}: a trace kept by an exec or exec_batch of this sandbox.
func (h *Handler) browserTrace(w http.ResponseWriter, r *http.Request, p service.Principal) {
	ref := r.PathValue("ref")
	trace, err := h.svc.BrowserTrace(r.Context(), p, r.PathValue("id"), ref)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"trace_ref": ref, "trace": trace})
}
