package bayapi

import (
	"net/http"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// nodeExec is POST /v1/sandboxes/{id}/node/exec: python/exec's body and answer, run in the sandbox's persistent
// Node.js context (variables persist, top-level await, the last expression's value). Node answers carry no images.
func (h *Handler) nodeExec(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.kernelExec(w, r, p, service.LangNode)
}

// rExec is POST /v1/sandboxes/{id}/r/exec: python/exec's body and answer, run in the sandbox's persistent R session
// (variables persist, plots come back as PNG images, an R error is success false with R's message).
func (h *Handler) rExec(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.kernelExec(w, r, p, service.LangR)
}
