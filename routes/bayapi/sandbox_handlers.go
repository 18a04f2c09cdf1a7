package bayapi

import (
	"net/http"
	"slices"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// DefaultProfile is what a create without a profile asks for (Bay's default).
const DefaultProfile = service.DefaultProfile

func (h *Handler) listProfiles(w http.ResponseWriter, r *http.Request, _ service.Principal) {
	q := queryFields(r)
	detail := q.boolean("detail", false)
	if !decodeOrFail(w, q) {
		return
	}
	items := []map[string]any{}
	for _, p := range h.svc.Profiles() {
		caps := p.Capabilities
		if caps == nil {
			caps = []string{}
		}
		item := map[string]any{
			"id":           p.ID,
			"image":        p.Image,
			"resources":    map[string]any{"cpus": p.Resources.CPUs, "memory": p.Resources.Memory},
			"capabilities": caps,
			"idle_timeout": int64(p.IdleTimeout.Std() / time.Second),
			"description":  nilIfEmpty(p.Description),
			"containers":   nil,
		}
		if detail {
			item["containers"] = []map[string]any{{
				"name": "sandgate-agent", "image": p.Image, "runtime_type": "ship",
				"resources":    map[string]any{"cpus": p.Resources.CPUs, "memory": p.Resources.Memory},
				"capabilities": caps,
			}}
		}
		items = append(items, item)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (h *Handler) createSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.withIdempotency(w, r, p, func(w http.ResponseWriter, r *http.Request) {
		f := bodyFields(r, false)
		profile := f.str("profile", false, DefaultProfile)
		cargoID := f.optStr("cargo_id")
		ttl := f.integer("ttl", 0, bound(0), nil, false)
		depsEnv := f.dependencies() // create_customise.go
		snapshotID := f.optStr("snapshot_id")
		_, profileGiven := f.get("profile")
		if !decodeOrFail(w, f) {
			return
		}
		if snapshotID != nil {
			if cargoID != nil {
				writeError(w, r, service.Errorf(service.CodeValidation, "cargo_id and snapshot_id cannot both be given"))
				return
			}
			if !profileGiven {
				profile = "" // the snapshot's own
			}
			h.createFromSnapshot(w, r, p, *snapshotID, profile, ttl, depsEnv) // lifecycle_ops.go
			return
		}
		cp := service.CreateParams{Profile: profile, TTL: time.Duration(ttl) * time.Second, CargoID: cargoID}
		sb, err := h.svc.CreateSandboxEnv(r.Context(), p, cp, depsEnv)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, h.describe(sb, false))
	})
}

func (h *Handler) listSandboxes(w http.ResponseWriter, r *http.Request, p service.Principal) {
	q := queryFields(r)
	limit := q.integer("limit", 50, bound(1), bound(200), false)
	cursor := q.str("cursor", false, "")
	status := q.str("status", false, "")
	if status != "" && !slices.Contains([]string{"idle", "starting", "ready", "paused", "failed", "expired"}, status) {
		q.issue("enum", q.loc("status"), "Input should be 'idle', 'starting', 'ready', 'paused', 'failed' or 'expired'", status,
			map[string]any{"expected": "'idle', 'starting', 'ready', 'paused', 'failed' or 'expired'"})
	}
	if !decodeOrFail(w, q) {
		return
	}
	list, next, err := h.svc.ListSandboxes(r.Context(), p, sandboxes.ListOptions{Status: sandboxes.Status(status), Limit: int(limit), Cursor: cursor})
	if err != nil {
		writeError(w, r, err)
		return
	}
	items := make([]service.SandboxView, 0, len(list))
	for _, sb := range list {
		items = append(items, h.describe(sb, false))
	}
	var nc *string
	if next != "" {
		nc = &next
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": nc})
}

func (h *Handler) getSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	sb, err := h.svc.Visible(r.Context(), p, r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.describe(sb, true))
}

func (h *Handler) deleteSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.DeleteSandbox(r.Context(), p, r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) stopSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.StopSandbox(r.Context(), p, r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "stopped"})
}

func (h *Handler) keepalive(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.Keepalive(r.Context(), p, r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) extendTTL(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.withIdempotency(w, r, p, func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		f := bodyFields(r, true)
		by := f.integer("extend_by", 0, bound(0), nil, true)
		if _, ok := f.get("extend_by"); !ok && len(f.issues) == 0 {
			f.issue("missing", f.loc("extend_by"), "Field required", f.input(), nil)
		}
		if !decodeOrFail(w, f) {
			return
		}
		sb, err := h.svc.ExtendTTL(r.Context(), p, id, time.Duration(by)*time.Second)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, h.describe(sb, false))
	})
}

// describe is sb in Bay's SandboxResponse.
func (h *Handler) describe(sb sandboxes.Sandbox, withContainers bool) service.SandboxView {
	return service.Describe(sb, h.cfg.Version, withContainers)
}
