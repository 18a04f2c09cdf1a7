package pages

import (
	"context"
	"net/http"

	"github.com/sandgate/sandgate/sandboxes"
)

// Pauser is what the console's pause and resume buttons need (*sandboxes.Manager has it). A Lifecycle without it
// answers those actions with capability_not_supported.
type Pauser interface {
	Pause(ctx context.Context, id string) (*sandboxes.Sandbox, error)
	Resume(ctx context.Context, id string) (*sandboxes.Sandbox, error)
}

// consolePause pauses or resumes a sandbox the session may see (consoleAction checked that).
func (h *Handler) consolePause(w http.ResponseWriter, r *http.Request, id string, pause bool) {
	p, ok := h.cfg.Sandboxes.(Pauser)
	if !ok {
		writeCoreError(w, sandboxes.CodeCapabilityAbsent, "this gateway cannot pause sandboxes")
		return
	}
	var sb *sandboxes.Sandbox
	var err error
	if pause {
		sb, err = p.Pause(r.Context(), id)
	} else {
		sb, err = p.Resume(r.Context(), id)
	}
	if err != nil {
		writeLifecycleError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxView{Sandbox: sb})
}
