package bayapi

import (
	"errors"
	"net/http"
	"sort"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

const (
	cargoBackend   = "docker_volume"
	defaultCargoMB = 1024
)

// ManagedCargo is how the workspace the Manager makes for a sandbox created without a cargo is listed: Bay's
// managed cargo of the default size, which goes with its sandbox (service.Config.ManagedWorkspace).
func ManagedCargo() *sandboxes.WorkspaceSpec {
	return &sandboxes.WorkspaceSpec{Backend: cargoBackend, SizeLimitMB: defaultCargoMB}
}

// cargoResponse is Bay's cargo shape (the owner stays internal).
func cargoResponse(c *sandboxes.Workspace) map[string]any {
	return map[string]any{
		"id": c.ID, "managed": c.Managed, "managed_by_sandbox_id": c.ManagedBySandboxID, "backend": c.Backend,
		"size_limit_mb": c.SizeLimitMB, "created_at": service.ISO(c.CreatedAt), "last_accessed_at": service.ISO(c.LastAccessedAt),
	}
}

func (h *Handler) createCargo(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.withIdempotency(w, r, p, func(w http.ResponseWriter, r *http.Request) {
		f := bodyFields(r, false)
		size := f.integer("size_limit_mb", defaultCargoMB, bound(1), bound(65536), false)
		if !decodeOrFail(w, f) {
			return
		}
		// The volume exists when the answer arrives (Bay's cargo manager creates it in the request), not at the
		// first mount.
		c, err := h.svc.CreateWorkspace(r.Context(), p, sandboxes.WorkspaceSpec{SizeLimitMB: int(size), Backend: cargoBackend})
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, cargoResponse(c))
	})
}

func (h *Handler) listCargos(w http.ResponseWriter, r *http.Request, p service.Principal) {
	q := queryFields(r)
	limit := q.integer("limit", 50, bound(1), bound(200), false)
	cursor := q.str("cursor", false, "")
	_, managedSet := q.get("managed")
	managed := q.boolean("managed", false)
	if !decodeOrFail(w, q) {
		return
	}
	all, err := h.svc.Workspaces(r.Context(), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	items := []map[string]any{}
	var next *string
	for _, c := range all {
		// Bay lists external cargos unless managed=true is asked for.
		if c.Managed != (managedSet && managed) {
			continue
		}
		if cursor != "" && c.ID <= cursor {
			continue
		}
		if len(items) == int(limit) {
			last := items[len(items)-1]["id"].(string)
			next = &last
			break
		}
		items = append(items, cargoResponse(c))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (h *Handler) ownCargo(w http.ResponseWriter, r *http.Request, p service.Principal) (*sandboxes.Workspace, bool) {
	c, err := h.svc.Workspace(r.Context(), p, r.PathValue("cid"))
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	return c, true
}

func (h *Handler) getCargo(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if c, ok := h.ownCargo(w, r, p); ok {
		writeJSON(w, http.StatusOK, cargoResponse(c))
	}
}

// deleteCargo refuses while a live sandbox uses the cargo (Bay's 409 with details.active_sandbox_ids; the Manager
// decides under its lock). A cargo deleted meanwhile by another request is deleted: 204.
func (h *Handler) deleteCargo(w http.ResponseWriter, r *http.Request, p service.Principal) {
	c, ok := h.ownCargo(w, r, p)
	if !ok {
		return
	}
	err := h.svc.DeleteWorkspace(r.Context(), p, c.ID)
	var inUse *sandboxes.Error
	switch {
	case errors.As(err, &inUse) && inUse.Code == sandboxes.CodeWorkspaceInUse:
		ids, _ := inUse.Details["active_sandbox_ids"].([]string)
		writeError(w, r, service.Errorf(service.CodeConflict, "Cargo %s is in use by %d sandbox(es)", c.ID, len(ids)).
			With("active_sandbox_ids", ids))
		return
	case err != nil && service.AsError(err).Code != service.CodeNotFound:
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
