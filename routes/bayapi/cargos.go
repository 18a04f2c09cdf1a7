package bayapi

import (
	"context"
	"net/http"
	"sort"

	"github.com/sandgate/sandgate/sandboxes"
)

const (
	cargoBackend   = "docker_volume"
	defaultCargoMB = 1024
)

// Workspaces is what the cargo routes need of the Manager: a cargo is one of its workspaces, and creating,
// listing and deleting them (the in-use check included) is the Manager's.
type Workspaces interface {
	CreateWorkspace(ctx context.Context, spec sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error)
	// Workspace fails with sandboxes.CodeNotFound when there is none.
	Workspace(ctx context.Context, id string) (*sandboxes.Workspace, error)
	// Workspaces lists owner's workspaces ("": everyone's) in id order.
	Workspaces(ctx context.Context, owner string) ([]*sandboxes.Workspace, error)
	// DeleteWorkspace fails with sandboxes.CodeWorkspaceInUse while live sandboxes mount it.
	DeleteWorkspace(ctx context.Context, id string) error
}

// cargoResponse is Bay's cargo shape (the owner stays internal).
func cargoResponse(c *Cargo) map[string]any {
	return map[string]any{
		"id": c.ID, "managed": c.Managed, "managed_by_sandbox_id": c.ManagedBySandboxID, "backend": c.Backend,
		"size_limit_mb": c.SizeLimitMB, "created_at": iso(c.CreatedAt), "last_accessed_at": iso(c.LastAccessedAt),
	}
}

func (h *Handler) createCargo(w http.ResponseWriter, r *http.Request, p Principal) {
	h.withIdempotency(w, r, p, func(w http.ResponseWriter, r *http.Request) {
		f := bodyFields(r, false)
		size := f.integer("size_limit_mb", defaultCargoMB, bound(1), bound(65536), false)
		if !decodeOrFail(w, f) {
			return
		}
		// The volume exists when the answer arrives (Bay's cargo manager creates it in the request), not at the
		// first mount.
		c, err := h.cfg.Sandboxes.CreateWorkspace(r.Context(), sandboxes.WorkspaceSpec{Owner: p.Owner, SizeLimitMB: int(size), Backend: cargoBackend})
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, cargoResponse(c))
	})
}

func (h *Handler) listCargos(w http.ResponseWriter, r *http.Request, p Principal) {
	q := queryFields(r)
	limit := q.integer("limit", 50, bound(1), bound(200), false)
	cursor := q.str("cursor", false, "")
	_, managedSet := q.get("managed")
	managed := q.boolean("managed", false)
	if !decodeOrFail(w, q) {
		return
	}
	owner := p.Owner
	if p.Admin {
		owner = ""
	}
	all, err := h.cfg.Sandboxes.Workspaces(r.Context(), owner)
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

func (h *Handler) ownCargo(w http.ResponseWriter, r *http.Request, p Principal) (*Cargo, bool) {
	id := r.PathValue("cid")
	c, err := h.cfg.Sandboxes.Workspace(r.Context(), id)
	if err != nil && asAPIError(err).Code != CodeNotFound {
		writeError(w, r, err)
		return nil, false
	}
	if c == nil || (!p.Admin && c.Owner != p.Owner) {
		writeError(w, r, errorf(CodeNotFound, "Cargo not found: %s", id))
		return nil, false
	}
	return c, true
}

func (h *Handler) getCargo(w http.ResponseWriter, r *http.Request, p Principal) {
	if c, ok := h.ownCargo(w, r, p); ok {
		writeJSON(w, http.StatusOK, cargoResponse(c))
	}
}

// deleteCargo refuses while a live sandbox uses the cargo (Bay's 409 with details.active_sandbox_ids; the Manager
// decides under its lock). A cargo deleted meanwhile by another request is deleted: 204.
func (h *Handler) deleteCargo(w http.ResponseWriter, r *http.Request, p Principal) {
	c, ok := h.ownCargo(w, r, p)
	if !ok {
		return
	}
	if err := h.cfg.Sandboxes.DeleteWorkspace(r.Context(), c.ID); err != nil && asAPIError(err).Code != CodeNotFound {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
