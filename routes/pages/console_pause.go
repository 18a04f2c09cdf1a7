package pages

import (
	"net/http"
)

// consolePause pauses or resumes a sandbox the session may see (consoleAction checked that); a gateway that cannot
// pause answers the service's capability_not_supported.
func (h *Handler) consolePause(w http.ResponseWriter, r *http.Request, cs *consoleSession, id string, pause bool) {
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
