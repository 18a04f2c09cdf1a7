package bayapi

import (
	"net/http"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Pause, resume, snapshots and fork: our additions, in Bay's style (same auth, envelope and owner scoping). A
// backend that lacks them answers capability_not_supported.

// SnapshotResponse is a snapshot as the API shows it (its storage location stays internal).
type SnapshotResponse struct {
	ID              string  `json:"id"`
	Name            string  `json:"name"`
	Kind            string  `json:"kind"`
	SourceSandboxID string  `json:"source_sandbox_id"`
	Profile         string  `json:"profile"`
	SizeBytes       int64   `json:"size_bytes"`
	Files           int64   `json:"files"`
	CopyMethod      string  `json:"copy_method"`
	CreatedAt       string  `json:"created_at"`
	Owner           *string `json:"owner,omitempty"` // admin keys only
}

// CopyResponse says how a workspace copy was made (fork, create from a snapshot).
type CopyResponse struct {
	Method     string  `json:"method"` // reflink or streamed
	Bytes      int64   `json:"bytes"`
	Files      int64   `json:"files"`
	DurationMS float64 `json:"duration_ms"`
}

func copyResponse(s sandboxes.CopyStats) CopyResponse {
	return CopyResponse{Method: s.Method, Bytes: s.Bytes, Files: s.Files, DurationMS: float64(s.Duration.Microseconds()) / 1000}
}

func (h *Handler) lifecycleRoutes() []route {
	S := "/v1/sandboxes/{id}"
	return []route{
		{"POST", S + "/pause", "Freeze the sandbox's processes (memory, processes and PTYs kept; TTL keeps running)", false, false, h.pauseSandbox},
		{"POST", S + "/resume", "Thaw a paused sandbox (any request to it does too)", false, false, h.resumeSandbox},
		{"POST", S + "/snapshots", "Capture the workspace as a named snapshot (consistent: pause, capture, resume)", false, false, h.createSnapshot},
		{"GET", S + "/snapshots", "List the caller's snapshots taken of this sandbox", false, false, h.listSandboxSnapshots},
		{"POST", S + "/fork", "Create a new sandbox with a copy of this one's workspace", false, false, h.forkSandbox},
		{"GET", "/v1/snapshots", "List the caller's snapshots", false, false, h.listSnapshots},
		{"GET", "/v1/snapshots/{sid}", "Get a snapshot", false, false, h.getSnapshot},
		{"DELETE", "/v1/snapshots/{sid}", "Delete a snapshot and free its storage", false, false, h.deleteSnapshot},
	}
}

func (h *Handler) pauseSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.pauseOrResume(w, r, p, true)
}

func (h *Handler) resumeSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.pauseOrResume(w, r, p, false)
}

func (h *Handler) pauseOrResume(w http.ResponseWriter, r *http.Request, p service.Principal, pause bool) {
	op := h.svc.Resume
	if pause {
		op = h.svc.Pause
	}
	sb, err := op(r.Context(), p, r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.describe(sb, false))
}

func (h *Handler) snapshotResponse(s sandboxes.Snapshot, p service.Principal) SnapshotResponse {
	resp := SnapshotResponse{ID: s.ID, Name: s.Name, Kind: string(s.Kind), SourceSandboxID: s.Source, Profile: s.Profile,
		SizeBytes: s.SizeBytes, Files: s.Files, CopyMethod: s.Method, CreatedAt: service.ISO(s.CreatedAt)}
	if p.Admin {
		o := s.Owner
		resp.Owner = &o
	}
	return resp
}

func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.CanSnapshot(); err != nil {
		writeError(w, r, err)
		return
	}
	f := bodyFields(r, false)
	name := f.str("name", false, "")
	kind := f.str("kind", false, string(sandboxes.SnapshotWorkspace))
	if !decodeOrFail(w, f) {
		return
	}
	snap, err := h.svc.CreateSnapshot(r.Context(), p, r.PathValue("id"), sandboxes.SnapshotRequest{Name: name, Kind: sandboxes.SnapshotKind(kind)})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, h.snapshotResponse(snap, p))
}

func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.writeSnapshots(w, r, p, "")
}

func (h *Handler) listSandboxSnapshots(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.writeSnapshots(w, r, p, r.PathValue("id"))
}

func (h *Handler) writeSnapshots(w http.ResponseWriter, r *http.Request, p service.Principal, source string) {
	list, err := h.svc.Snapshots(r.Context(), p, source)
	if err != nil {
		writeError(w, r, err)
		return
	}
	items := []SnapshotResponse{}
	for _, snap := range list {
		items = append(items, h.snapshotResponse(snap, p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (h *Handler) getSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	snap, err := h.svc.GetSnapshot(r.Context(), p, r.PathValue("sid"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.snapshotResponse(snap, p))
}

func (h *Handler) deleteSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.DeleteSnapshot(r.Context(), p, r.PathValue("sid")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) forkSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.CanSnapshot(); err != nil {
		writeError(w, r, err)
		return
	}
	f := bodyFields(r, false)
	ttl := f.integer("ttl", 0, bound(0), nil, false)
	if !decodeOrFail(w, f) {
		return
	}
	sb, stats, err := h.svc.Fork(r.Context(), p, r.PathValue("id"), time.Duration(ttl)*time.Second)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"sandbox": h.describe(sb, false), "copy": copyResponse(stats)})
}

// createFromSnapshot serves POST /v1/sandboxes with snapshot_id: the new sandbox's workspace starts as a copy of
// the snapshot. profile "" takes the snapshot's profile.
func (h *Handler) createFromSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal, snapshotID, profile string, ttl int64, env map[string]string) {
	sb, err := h.svc.CreateFromSnapshot(r.Context(), p, snapshotID, profile, time.Duration(ttl)*time.Second, env)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, h.describe(sb, false))
}
