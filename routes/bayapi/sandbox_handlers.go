package bayapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// DefaultProfile is what a create without a profile asks for (Bay's default).
const DefaultProfile = "python-default"

// SandboxResponse is Bay's SandboxResponse, field for field.
type SandboxResponse struct {
	ID            string          `json:"id"`
	Status        string          `json:"status"`
	Profile       string          `json:"profile"`
	CargoID       *string         `json:"cargo_id"`
	Capabilities  []string        `json:"capabilities"`
	CreatedAt     string          `json:"created_at"`
	ExpiresAt     *string         `json:"expires_at"`
	IdleExpiresAt *string         `json:"idle_expires_at"`
	Containers    []ContainerInfo `json:"containers"`
	// LastError says why the sandbox's last start failed (status "failed"), else null. A sandgate addition: Bay's
	// clients ignore fields they do not know.
	LastError *string `json:"last_error"`
}

// ContainerInfo describes a runtime container of a ready sandbox (Bay fills it on GET-one only).
type ContainerInfo struct {
	Name         string   `json:"name"`
	RuntimeType  string   `json:"runtime_type"`
	Status       string   `json:"status"`
	Version      string   `json:"version"`
	Capabilities []string `json:"capabilities"`
	Healthy      bool     `json:"healthy"`
}

func (h *Handler) sandboxResponse(sb sandboxes.Sandbox, withContainers bool) SandboxResponse {
	caps := sb.Capabilities
	if caps == nil {
		caps = []string{}
	}
	resp := SandboxResponse{
		ID: sb.ID, Status: bayStatus(sb.Status), Profile: sb.Profile, Capabilities: caps,
		CreatedAt: iso(sb.CreatedAt), ExpiresAt: isoPtr(sb.ExpiresAt), IdleExpiresAt: isoPtr(sb.IdleExpiresAt),
	}
	if sb.WorkspaceID != "" {
		id := sb.WorkspaceID
		resp.CargoID = &id
	}
	if sb.LastError != "" {
		msg := sb.LastError
		resp.LastError = &msg
	}
	if withContainers && sb.Status == sandboxes.StatusReady {
		resp.Containers = []ContainerInfo{{
			Name: "sandgate-agent", RuntimeType: "ship", Status: "running", Version: h.cfg.Version,
			Capabilities: caps, Healthy: true,
		}}
	}
	return resp
}

// bayStatus is the status a Bay client sees. Bay answers a create with idle (no session yet) and a warm claim with
// ready; we start every sandbox eagerly, so a sandbox whose agent is not ready yet reads idle until it is usable,
// and starting is never answered (docs/api.md lists this among the deliberate differences).
func bayStatus(s sandboxes.Status) string {
	if s == sandboxes.StatusStarting {
		return string(sandboxes.StatusIdle)
	}
	return string(s)
}

// visible fetches a sandbox the caller may see; another owner's sandbox does not exist for it (Bay scopes queries).
func (h *Handler) visible(ctx context.Context, id string, p service.Principal) (sandboxes.Sandbox, error) {
	sb, err := h.cfg.Sandboxes.Get(ctx, id)
	if err != nil {
		return sb, err
	}
	if !p.Admin && sb.Owner != p.Owner {
		return sandboxes.Sandbox{}, service.Errorf(service.CodeNotFound, "Sandbox not found: %s", id)
	}
	return sb, nil
}

func (h *Handler) listProfiles(w http.ResponseWriter, r *http.Request, _ service.Principal) {
	q := queryFields(r)
	detail := q.boolean("detail", false)
	if !decodeOrFail(w, q) {
		return
	}
	items := []map[string]any{}
	for _, p := range h.cfg.Sandboxes.Profiles() {
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
		cp := CreateParams{Profile: profile, TTL: time.Duration(ttl) * time.Second, CargoID: cargoID}
		resp, err := h.createSandboxEnv(r.Context(), p, cp, depsEnv)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, resp)
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
	items, next, err := h.ListSandboxes(r.Context(), p, sandboxes.ListOptions{Status: sandboxes.Status(status), Limit: int(limit), Cursor: cursor})
	if err != nil {
		writeError(w, r, err)
		return
	}
	var nc *string
	if next != "" {
		nc = &next
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": nc})
}

func (h *Handler) getSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	sb, err := h.visible(r.Context(), r.PathValue("id"), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.sandboxResponse(sb, true))
}

func (h *Handler) deleteSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.DeleteSandbox(r.Context(), p, r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) stopSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.StopSandbox(r.Context(), p, r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "stopped"})
}

func (h *Handler) keepalive(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if _, err := h.visible(r.Context(), id, p); err != nil {
		writeError(w, r, err)
		return
	}
	if err := h.cfg.Sandboxes.Keepalive(r.Context(), id); err != nil {
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
		sb, err := h.unexpired(r.Context(), id, p)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if sb.ExpiresAt == nil {
			writeError(w, r, service.Errorf(service.CodeTTLInfinite, "Sandbox has no TTL to extend: %s", id))
			return
		}
		sb, err = h.cfg.Sandboxes.ExtendTTL(r.Context(), id, time.Duration(by)*time.Second)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, h.sandboxResponse(sb, false))
	})
}

// unexpired fetches a sandbox the caller may see and act on: an expired one answers sandbox_expired.
func (h *Handler) unexpired(ctx context.Context, id string, p service.Principal) (sandboxes.Sandbox, error) {
	sb, err := h.visible(ctx, id, p)
	if err != nil {
		return sb, err
	}
	if sb.Status == sandboxes.StatusExpired {
		return sandboxes.Sandbox{}, service.Errorf(service.CodeSandboxExpired, "Sandbox has expired: %s", id)
	}
	return sb, nil
}

// running resolves a sandbox the caller owns for a capability call: it must not be expired, its profile must grant
// the capability, and its compute is started within this request when idle (Bay's ensure_running).
func (h *Handler) running(ctx context.Context, id string, p service.Principal, capability string) (sandboxes.Target, error) {
	sb, err := h.unexpired(ctx, id, p)
	if err != nil {
		return sandboxes.Target{}, err
	}
	if capability != "" && !slices.Contains(sb.Capabilities, capability) {
		avail := sb.Capabilities
		if avail == nil {
			avail = []string{}
		}
		return sandboxes.Target{}, service.Errorf(service.CodeCapability, "Sandbox %s does not support capability %q", id, capability).
			With("capability", capability).With("available", avail)
	}
	t, err := h.cfg.Sandboxes.Hold(ctx, id)
	if err != nil {
		var e *sandboxes.Error
		if errors.As(err, &e) && e.Code == sandboxes.CodeNotReady {
			if e.Details == nil {
				e.Details = map[string]any{}
			}
			if _, ok := e.Details["sandbox_id"]; !ok {
				e.Details["sandbox_id"] = id
			}
			if _, ok := e.Details["retry_after_ms"]; !ok {
				e.Details["retry_after_ms"] = 1000
			}
		}
		return sandboxes.Target{}, err
	}
	return t, nil
}
