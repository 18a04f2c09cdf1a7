package bayapi

import (
	"context"
	"net/http"

	"github.com/sandgate/sandgate/sandboxes"
)

// NodeAgent is implemented by an Agent whose sandboxes run the Node.js kernel (POST /v1/node/exec). Its request and
// result are python/exec's, because the agent answers both in one shape.
type NodeAgent interface {
	Node(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)
}

// nodeExec is POST /v1/sandboxes/{id}/node/exec: python/exec's body and answer, run in the sandbox's persistent
// Node.js context (variables persist, top-level await, the last expression's value). Node answers carry no images.
func (h *Handler) nodeExec(w http.ResponseWriter, r *http.Request, p Principal) {
	h.kernelExec(w, r, p, LangNode)
}

// RAgent is implemented by an Agent whose sandboxes run the R session (POST /v1/r/exec), in python/exec's shape.
type RAgent interface {
	R(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)
}

// rExec is POST /v1/sandboxes/{id}/r/exec: python/exec's body and answer, run in the sandbox's persistent R session
// (variables persist, plots come back as PNG images, an R error is success false with R's message).
func (h *Handler) rExec(w http.ResponseWriter, r *http.Request, p Principal) {
	h.kernelExec(w, r, p, LangR)
}
