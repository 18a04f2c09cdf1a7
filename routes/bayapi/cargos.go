package bayapi

import (
	"net/http"
	"sort"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

const (
	cargoBackend   = "docker_volume"
	defaultCargoMB = 1024
)

// cargoResponse is Bay's cargo shape (the owner stays internal).
func cargoResponse(c *Cargo) map[string]any {
	return map[string]any{
		"id": c.ID, "managed": c.Managed, "managed_by_sandbox_id": c.ManagedBySandboxID, "backend": c.Backend,
		"size_limit_mb": c.SizeLimitMB, "created_at": iso(c.CreatedAt), "last_accessed_at": iso(c.LastAccessedAt),
	}
}

func (h *Handler) createCargo(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.withIdempotency(w, r, p, func(w http.ResponseWriter, r *http.Request) {
		f := bodyFields(r, false)
		size := f.integer("size_limit_mb", defaultCargoMB, bound(1), bound(65536), false)
		if !decodeOrFail(w, f) {
			return
		}
		now := h.cfg.Now().UTC()
		c := &Cargo{
			ID: service.NewID("ws-"), Owner: p.Owner, Backend: cargoBackend, SizeLimitMB: int(size),
			CreatedAt: now, LastAccessedAt: now,
		}
		// The volume exists when the answer arrives (Bay's cargo manager creates it in the request), not at the
		// first mount.
		if wc, ok := h.svc.Sandboxes().(WorkspaceCreator); ok {
			if err := wc.CreateWorkspace(r.Context(), c.ID); err != nil {
				writeError(w, r, err)
				return
			}
		}
		if err := h.cfg.Store.PutCargo(c); err != nil {
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
	all, err := h.cfg.Store.Cargos()
	if err != nil {
		writeError(w, r, err)
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	items := []map[string]any{}
	var next *string
	for _, c := range all {
		if !p.Admin && c.Owner != p.Owner {
			continue
		}
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

func (h *Handler) ownCargo(w http.ResponseWriter, r *http.Request, p service.Principal) (*Cargo, bool) {
	id := r.PathValue("cid")
	c, err := h.cfg.Store.Cargo(id)
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	if c == nil || (!p.Admin && c.Owner != p.Owner) {
		writeError(w, r, service.Errorf(service.CodeNotFound, "Cargo not found: %s", id))
		return nil, false
	}
	return c, true
}

func (h *Handler) getCargo(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if c, ok := h.ownCargo(w, r, p); ok {
		writeJSON(w, http.StatusOK, cargoResponse(c))
	}
}

// deleteCargo refuses while a live sandbox uses the cargo (Bay's 409 with details.active_sandbox_ids).
func (h *Handler) deleteCargo(w http.ResponseWriter, r *http.Request, p service.Principal) {
	c, ok := h.ownCargo(w, r, p)
	if !ok {
		return
	}
	var active []string
	cursor := ""
	for {
		list, next, err := h.svc.Sandboxes().List(r.Context(), sandboxes.ListOptions{Limit: 200, Cursor: cursor})
		if err != nil {
			writeError(w, r, err)
			return
		}
		for _, sb := range list {
			if sb.WorkspaceID == c.ID && sb.Status != sandboxes.StatusExpired {
				active = append(active, sb.ID)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(active) > 0 {
		writeError(w, r, service.Errorf(service.CodeConflict, "Cargo %s is in use by %d sandbox(es)", c.ID, len(active)).With("active_sandbox_ids", active))
		return
	}
	if rm, ok := h.svc.Sandboxes().(WorkspaceRemover); ok {
		if err := rm.RemoveWorkspace(r.Context(), c.ID); err != nil && service.AsError(err).Code != service.CodeNotFound {
			writeError(w, r, err)
			return
		}
	}
	if err := h.cfg.Store.DeleteCargo(c.ID); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
