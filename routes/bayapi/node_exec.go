package bayapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// NodeAgent is implemented by an Agent whose sandboxes run the Node.js kernel (POST /v1/node/exec). Its request and
// result are python/exec's, because the agent answers both in one shape.
type NodeAgent interface {
	Node(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)
}

// nodeExec is POST /v1/sandboxes/{id}/node/exec: python/exec's body and answer, run in the sandbox's persistent
// Node.js context (variables persist, top-level await, the last expression's value).
func (h *Handler) nodeExec(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("id")
	f := bodyFields(r, true)
	code := f.str("code", true, "")
	timeout := f.integer("timeout", defaultExecTimeout, bound(1), bound(maxExecTimeout), false)
	meta := readExecMeta(f)
	if !decodeOrFail(w, f) {
		return
	}
	agent, ok := h.cfg.Agent.(NodeAgent)
	if !ok {
		writeError(w, r, errorf(CodeCapability, "this gateway's agent client does not run node").with("capability", sandboxes.CapNode).with("available", []string{}))
		return
	}
	t, err := h.running(r.Context(), id, p, sandboxes.CapNode)
	if err != nil {
		writeError(w, r, err)
		return
	}
	d := time.Duration(timeout) * time.Second
	ctx, cancel := contextWithTimeout(r, d+agentGrace)
	defer cancel()
	start := time.Now()
	res, err := agent.Node(ctx, t, PythonRequest{Code: code, Timeout: d})
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
	if res.Error == "" {
		text += res.Stderr
	}
	success := res.Error == ""
	eid := h.record(id, "node", code, success, elapsed, text, res.Error, meta)
	var codeOut *string
	if meta.includeCode {
		codeOut = &code
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": success,
		"output":  text,
		"error":   emptyToNil(res.Error),
		"data": map[string]any{
			"execution_count": res.ExecutionCount,
			"output":          map[string]any{"text": text, "images": []map[string]string{}},
		},
		"execution_id":      eid,
		"execution_time_ms": elapsed.Milliseconds(),
		"code":              codeOut,
	})
}
