package sandboxes

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Workspaces (Bay's cargos) are volumes a caller creates on their own and mounts into sandboxes of theirs
// (CreateRequest.WorkspaceID); they outlive those sandboxes until they are deleted. Their records are in the one
// store (store_workspaces.go). The in-use check of a delete and the mount of a create are both decided under the
// Manager's lock, so a create and a delete of the same workspace never both succeed.

// CodeWorkspaceInUse: a workspace cannot be deleted while live sandboxes mount it (Details.active_sandbox_ids).
const CodeWorkspaceInUse = "workspace_in_use"

// WorkspaceSpec asks for a new workspace.
type WorkspaceSpec struct {
	Owner string
	// SizeLimitMB is recorded with the workspace and caps its volume (at least MinWorkspaceSize); 0: unlimited.
	SizeLimitMB int
	// Backend names the kind of volume for clients ("docker_volume").
	Backend string
}

// workspaceLocks is the Manager's state of workspaces being deleted, guarded by Manager.mu.
type workspaceLocks struct {
	deleting map[string]bool
}

func workspaceNotFound(id string) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("workspace %s not found", id)}
}

func (m *Manager) workspaceStore() (WorkspaceStore, error) {
	ws, ok := m.store.(WorkspaceStore)
	if !ok {
		return nil, Errorf(CodeEngine, "this gateway's store keeps no workspaces")
	}
	return ws, nil
}

// CreateWorkspace creates a workspace of spec.Owner and its volume now (Bay creates a cargo's volume at once), so it
// exists, with its labels, before any sandbox mounts it. It is never swept as an orphan: it belongs to its owner
// until DeleteWorkspace.
func (m *Manager) CreateWorkspace(ctx context.Context, spec WorkspaceSpec) (*Workspace, error) {
	ws, err := m.workspaceStore()
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	running := m.started && !m.closed
	m.mu.RUnlock()
	if !running {
		return nil, Errorf(CodeEngine, "the sandbox manager is not running")
	}
	now := m.clock().UTC()
	w := &Workspace{ID: "ws-" + randomHex(6), Owner: spec.Owner, Backend: spec.Backend, SizeLimitMB: spec.SizeLimitMB,
		CreatedAt: now, LastAccessedAt: now}
	// The record first: a crash before the volume exists leaves a workspace whose first mount creates its volume,
	// never a volume nobody knows of (caller-named volumes are not swept).
	if err := ws.PutCargo(w); err != nil {
		if ErrorCode(err) == CodeStorageFull {
			return nil, err // a full data disk is the caller's 507, not an engine failure (store_full.go)
		}
		return nil, &Error{Code: CodeEngine, Message: "recording workspace " + w.ID, Err: err}
	}
	rec := Record{WorkspaceID: w.ID, ManagedWorkspace: false}
	if err := m.driver.CreateVolume(ctx, m.VolumeName(w.ID), m.sizedVolumeLabels(rec, spec.SizeLimitMB)); err != nil {
		if derr := ws.DeleteCargo(w.ID); derr != nil {
			m.log.Warn("forgetting a workspace whose volume could not be made", "workspace", w.ID, "error", derr)
		}
		return nil, &Error{Code: CodeEngine, Message: fmt.Sprintf("creating workspace volume %s", m.VolumeName(w.ID)), Err: err}
	}
	return w, nil
}

// Workspace returns one workspace (CodeNotFound when there is none).
func (m *Manager) Workspace(_ context.Context, id string) (*Workspace, error) {
	ws, err := m.workspaceStore()
	if err != nil {
		return nil, err
	}
	w, err := ws.Cargo(id)
	if err != nil {
		return nil, &Error{Code: CodeEngine, Message: "reading workspace " + id, Err: err}
	}
	if w == nil {
		return nil, workspaceNotFound(id)
	}
	return w, nil
}

// Workspaces returns the workspaces of owner ("" : every owner's) in id order.
func (m *Manager) Workspaces(_ context.Context, owner string) ([]*Workspace, error) {
	ws, err := m.workspaceStore()
	if err != nil {
		return nil, err
	}
	all, err := ws.Cargos()
	if err != nil {
		return nil, &Error{Code: CodeEngine, Message: "listing workspaces", Err: err}
	}
	out := make([]*Workspace, 0, len(all))
	for _, w := range all {
		if owner == "" || w.Owner == owner {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteWorkspace removes a workspace, its volume and its record. While a live sandbox mounts it, it refuses with
// CodeWorkspaceInUse naming them (details.active_sandbox_ids). The check and the mark that makes creates on this
// workspace fail are one step under the Manager's lock: a racing create either mounts it first (and this delete
// refuses) or finds it gone.
func (m *Manager) DeleteWorkspace(ctx context.Context, id string) error {
	ws, err := m.workspaceStore()
	if err != nil {
		return err
	}
	w, err := ws.Cargo(id)
	if err != nil {
		return &Error{Code: CodeEngine, Message: "reading workspace " + id, Err: err}
	}
	if w == nil {
		return workspaceNotFound(id)
	}
	now := m.clock()
	m.mu.Lock()
	if m.workspaces.deleting[id] {
		m.mu.Unlock()
		return workspaceNotFound(id)
	}
	if users := m.workspaceUsersLocked(id, now); len(users) > 0 {
		m.mu.Unlock()
		return &Error{Code: CodeWorkspaceInUse, Message: fmt.Sprintf("workspace %s is in use by %d sandbox(es)", id, len(users)),
			Details: map[string]any{"active_sandbox_ids": users, "workspace_id": id}}
	}
	if m.workspaces.deleting == nil {
		m.workspaces.deleting = map[string]bool{}
	}
	m.workspaces.deleting[id] = true
	m.mu.Unlock()
	// The mark stays until the record is gone: a create that comes after it finds no workspace either way.
	defer func() {
		m.mu.Lock()
		delete(m.workspaces.deleting, id)
		m.mu.Unlock()
	}()
	if err := m.driver.RemoveVolume(ctx, m.VolumeName(id)); err != nil {
		return &Error{Code: CodeEngine, Message: fmt.Sprintf("removing workspace volume %s", m.VolumeName(id)), Err: err}
	}
	if err := ws.DeleteCargo(id); err != nil {
		return &Error{Code: CodeEngine, Message: "forgetting workspace " + id, Err: err}
	}
	return nil
}

// workspaceUsersLocked lists the live sandboxes that mount workspace id (expired ones are on their way out).
func (m *Manager) workspaceUsersLocked(id string, now time.Time) []string {
	var ids []string
	for _, e := range m.entries {
		if e.rec.WorkspaceID == id && !e.deleted && !e.rec.Warm && !expired(e, now) {
			ids = append(ids, e.rec.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// workspaceMountableLocked is Create's check of a caller-named workspace, under the Manager's lock: one being deleted
// cannot be mounted, and with req.WorkspaceMustExist neither can one without a record.
func (m *Manager) workspaceMountableLocked(req CreateRequest) error {
	if req.ownWorkspace {
		return nil
	}
	if m.workspaces.deleting[req.WorkspaceID] || m.spareHeldLocked(req.WorkspaceID) {
		return workspaceNotFound(req.WorkspaceID)
	}
	if !req.WorkspaceMustExist {
		return nil
	}
	ws, err := m.workspaceStore()
	if err != nil {
		return err
	}
	// A read of the memory-mapped store: no write, no fsync, while the lock is held.
	w, err := ws.Cargo(req.WorkspaceID)
	if err != nil {
		return &Error{Code: CodeEngine, Message: "reading workspace " + req.WorkspaceID, Err: err}
	}
	if w == nil {
		return workspaceNotFound(req.WorkspaceID)
	}
	return nil
}

// recordManagedWorkspace lists a new sandbox's own workspace as req.RecordWorkspace asks (Bay's managed cargo,
// managed by sb), once the sandbox is in the store. A failure is logged and never fails the create: the sandbox and
// its volume are whole without the record, which only lists them.
func (m *Manager) recordManagedWorkspace(req CreateRequest, sb *Sandbox, now time.Time) {
	if req.RecordWorkspace == nil {
		return
	}
	ws, ok := m.store.(WorkspaceStore)
	if !ok {
		return
	}
	now = now.UTC()
	sid := sb.ID
	// The size listed is the one enforced when the profile caps its workspaces (workspace_size), rounded up to MiB.
	size := req.RecordWorkspace.SizeLimitMB
	m.mu.RLock()
	if e := m.entries[sb.ID]; e != nil && e.rec.Spec != nil {
		if n := e.rec.Spec.Resources.WorkspaceBytes(); n > 0 {
			size = int((n + 1<<20 - 1) >> 20)
		}
	}
	m.mu.RUnlock()
	w := &Workspace{ID: sb.WorkspaceID, Owner: sb.Owner, Managed: true, ManagedBySandboxID: &sid,
		Backend: req.RecordWorkspace.Backend, SizeLimitMB: size, CreatedAt: now, LastAccessedAt: now}
	if err := ws.PutCargo(w); err != nil {
		m.log.Warn("recording a new sandbox's workspace", "sandbox", sb.ID, "workspace", sb.WorkspaceID, "error", err)
		return
	}
	// A delete that detached the sandbox before the record was written has already passed its drop: drop it here.
	m.mu.RLock()
	gone := m.entries[sb.ID] == nil
	m.mu.RUnlock()
	if gone {
		m.dropManagedWorkspaceRecord(Record{ID: sb.ID, WorkspaceID: sb.WorkspaceID})
	}
}

// dropManagedWorkspaceRecord forgets the workspace record a sandbox's own workspace was listed under (Bay's managed
// cargo), once the sandbox and its volume are gone, however it went: a delete, its TTL, the idle reaper, shutdown.
func (m *Manager) dropManagedWorkspaceRecord(rec Record) {
	ws, ok := m.store.(WorkspaceStore)
	if !ok {
		return
	}
	w, err := ws.Cargo(rec.WorkspaceID)
	if err != nil || w == nil || !w.Managed || w.ManagedBySandboxID == nil || *w.ManagedBySandboxID != rec.ID {
		return
	}
	if err := ws.DeleteCargo(rec.WorkspaceID); err != nil {
		m.log.Warn("forgetting a deleted sandbox's workspace record", "sandbox", rec.ID, "workspace", rec.WorkspaceID, "error", err)
	}
}
