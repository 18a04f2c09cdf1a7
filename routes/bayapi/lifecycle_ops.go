package bayapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Pause, resume, snapshots and fork: our additions, in Bay's style (same auth, envelope and owner scoping). A
// backend that lacks them answers capability_not_supported.

// Pauser is implemented by a backend that can freeze and thaw sandboxes.
type Pauser interface {
	Pause(ctx context.Context, id string) (sandboxes.Sandbox, error)
	Resume(ctx context.Context, id string) (sandboxes.Sandbox, error)
}

// Snapshotter is implemented by a backend that keeps workspace snapshots.
type Snapshotter interface {
	CreateSnapshot(ctx context.Context, id string, req sandboxes.SnapshotRequest) (sandboxes.Snapshot, error)
	// Snapshots lists owner's snapshots ("" lists every owner's), newest first.
	Snapshots(ctx context.Context, owner string) ([]sandboxes.Snapshot, error)
	GetSnapshot(ctx context.Context, id string) (sandboxes.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
	CreateFromSnapshot(ctx context.Context, req sandboxes.CreateRequest, snapshotID string) (sandboxes.Sandbox, sandboxes.CopyStats, error)
	Fork(ctx context.Context, id string, ttl time.Duration) (sandboxes.Sandbox, sandboxes.CopyStats, error)
}

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

func (h *Handler) pauser(w http.ResponseWriter, r *http.Request) Pauser {
	p, ok := h.svc.Sandboxes().(Pauser)
	if !ok {
		writeError(w, r, service.Errorf(service.CodeCapability, "pause is not available on this gateway").With("capability", "pause").With("available", []string{}))
		return nil
	}
	return p
}

func (h *Handler) snapshotter(w http.ResponseWriter, r *http.Request) Snapshotter {
	s, ok := h.svc.Sandboxes().(Snapshotter)
	if !ok {
		writeError(w, r, service.Errorf(service.CodeCapability, "snapshots are not available on this gateway").With("capability", "snapshots").With("available", []string{}))
		return nil
	}
	return s
}

func (h *Handler) pauseSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.pauseOrResume(w, r, p, true)
}

func (h *Handler) resumeSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.pauseOrResume(w, r, p, false)
}

func (h *Handler) pauseOrResume(w http.ResponseWriter, r *http.Request, p service.Principal, pause bool) {
	pr := h.pauser(w, r)
	if pr == nil {
		return
	}
	id := r.PathValue("id")
	if _, err := h.svc.Unexpired(r.Context(), p, id); err != nil {
		writeError(w, r, err)
		return
	}
	var sb sandboxes.Sandbox
	var err error
	if pause {
		sb, err = pr.Pause(r.Context(), id)
	} else {
		sb, err = pr.Resume(r.Context(), id)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.describe(sb, false))
}

func (h *Handler) snapshotResponse(s sandboxes.Snapshot, p service.Principal) SnapshotResponse {
	resp := SnapshotResponse{ID: s.ID, Name: s.Name, Kind: string(s.Kind), SourceSandboxID: s.Source, Profile: s.Profile,
		SizeBytes: s.SizeBytes, Files: s.Files, CopyMethod: s.Method, CreatedAt: iso(s.CreatedAt)}
	if p.Admin {
		o := s.Owner
		resp.Owner = &o
	}
	return resp
}

// visibleSnapshot fetches a snapshot the caller may use; another owner's does not exist for it.
func (h *Handler) visibleSnapshot(ctx context.Context, s Snapshotter, id string, p service.Principal) (sandboxes.Snapshot, error) {
	snap, err := s.GetSnapshot(ctx, id)
	if err != nil {
		return snap, err
	}
	if !p.Admin && snap.Owner != p.Owner {
		return sandboxes.Snapshot{}, service.Errorf(service.CodeNotFound, "Snapshot not found: %s", id)
	}
	return snap, nil
}

func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	s := h.snapshotter(w, r)
	if s == nil {
		return
	}
	f := bodyFields(r, false)
	name := f.str("name", false, "")
	kind := f.str("kind", false, string(sandboxes.SnapshotWorkspace))
	if !decodeOrFail(w, f) {
		return
	}
	id := r.PathValue("id")
	if _, err := h.svc.Unexpired(r.Context(), p, id); err != nil {
		writeError(w, r, err)
		return
	}
	snap, err := s.CreateSnapshot(r.Context(), id, sandboxes.SnapshotRequest{Name: name, Kind: sandboxes.SnapshotKind(kind)})
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
	id := r.PathValue("id")
	// The sandbox may be gone (snapshots outlive it): filter by source, scoped by owner like every list.
	h.writeSnapshots(w, r, p, id)
}

func (h *Handler) writeSnapshots(w http.ResponseWriter, r *http.Request, p service.Principal, source string) {
	s := h.snapshotter(w, r)
	if s == nil {
		return
	}
	owner := p.Owner
	if p.Admin {
		owner = ""
	}
	list, err := s.Snapshots(r.Context(), owner)
	if err != nil {
		writeError(w, r, err)
		return
	}
	items := []SnapshotResponse{}
	for _, snap := range list {
		if source == "" || snap.Source == source {
			items = append(items, h.snapshotResponse(snap, p))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (h *Handler) getSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	s := h.snapshotter(w, r)
	if s == nil {
		return
	}
	snap, err := h.visibleSnapshot(r.Context(), s, r.PathValue("sid"), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.snapshotResponse(snap, p))
}

func (h *Handler) deleteSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	s := h.snapshotter(w, r)
	if s == nil {
		return
	}
	id := r.PathValue("sid")
	if _, err := h.visibleSnapshot(r.Context(), s, id, p); err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.DeleteSnapshot(r.Context(), id); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) forkSandbox(w http.ResponseWriter, r *http.Request, p service.Principal) {
	s := h.snapshotter(w, r)
	if s == nil {
		return
	}
	f := bodyFields(r, false)
	ttl := f.integer("ttl", 0, bound(0), nil, false)
	if !decodeOrFail(w, f) {
		return
	}
	id := r.PathValue("id")
	if _, err := h.svc.Unexpired(r.Context(), p, id); err != nil {
		writeError(w, r, err)
		return
	}
	d := time.Duration(-1)
	if ttl > 0 {
		d = time.Duration(ttl) * time.Second
	}
	sb, stats, err := s.Fork(r.Context(), id, d)
	if err != nil {
		writeError(w, r, err)
		return
	}
	h.svc.RecordManaged(sb, p)
	writeJSON(w, http.StatusCreated, map[string]any{"sandbox": h.describe(sb, false), "copy": copyResponse(stats)})
}

// createFromSnapshot serves POST /v1/sandboxes with snapshot_id: the new sandbox's workspace starts as a copy of
// the snapshot. profile "" takes the snapshot's profile.
func (h *Handler) createFromSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal, snapshotID, profile string, ttl int64, env map[string]string) {
	s := h.snapshotter(w, r)
	if s == nil {
		return
	}
	if _, err := h.visibleSnapshot(r.Context(), s, snapshotID, p); err != nil {
		writeError(w, r, err)
		return
	}
	req := sandboxes.CreateRequest{Profile: profile, Owner: p.Owner, TTL: -1, Env: env}
	if ttl > 0 {
		req.TTL = time.Duration(ttl) * time.Second
	}
	sb, _, err := s.CreateFromSnapshot(r.Context(), req, snapshotID)
	if err != nil {
		writeError(w, r, err)
		return
	}
	h.svc.RecordManaged(sb, p)
	writeJSON(w, http.StatusCreated, h.describe(sb, false))
}
