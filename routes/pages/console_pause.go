package pages

import (
	"net/http"

	"github.com/sandgate/sandgate/sandboxes"
)

// consolePause pauses or resumes a sandbox the session may see (consoleAction checked that).
func (h *Handler) consolePause(w http.ResponseWriter, r *http.Request, cs *consoleSession, id string, pause bool) {
	if err := h.cfg.Service.CanPause(); err != nil {
		writeCoreError(w, sandboxes.CodeCapabilityAbsent, "this gateway cannot pause sandboxes")
		return
	}
	op := h.cfg.Service.Resume
	if pause {
		op = h.cfg.Service.Pause
	}
	sb, err := op(r.Context(), cs.principal, id)
	if err != nil {
		writeLifecycleError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxView{Sandbox: &sb})
}
