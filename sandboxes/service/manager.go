package service

import (
	"context"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Manager is the lifecycle Manager as the operations need it: Sandboxes, Pauser and Snapshotter (the Manager
// answers pointers; the operations take values).
type Manager struct {
	M *sandboxes.Manager
}

// Create starts a sandbox.
func (b Manager) Create(ctx context.Context, req sandboxes.CreateRequest) (sandboxes.Sandbox, error) {
	return deref(b.M.Create(ctx, req))
}

// Get describes a sandbox.
func (b Manager) Get(ctx context.Context, id string) (sandboxes.Sandbox, error) {
	return deref(b.M.Get(ctx, id))
}

// List returns one page of sandboxes and the cursor of the next.
func (b Manager) List(ctx context.Context, opts sandboxes.ListOptions) ([]sandboxes.Sandbox, string, error) {
	list, next, err := b.M.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	out := make([]sandboxes.Sandbox, 0, len(list))
	for _, sb := range list {
		out = append(out, *sb)
	}
	return out, next, nil
}

// Hold starts an idle sandbox's compute and leases it until ctx ends.
func (b Manager) Hold(ctx context.Context, id string) (sandboxes.Target, error) {
	return b.M.Hold(ctx, id)
}

// Stop stops a sandbox's compute, keeping its workspace.
func (b Manager) Stop(ctx context.Context, id string) error { return b.M.Stop(ctx, id) }

// Keepalive counts as activity.
func (b Manager) Keepalive(ctx context.Context, id string) error { return b.M.Keepalive(ctx, id) }

// Delete deletes a sandbox.
func (b Manager) Delete(ctx context.Context, id string) error { return b.M.Delete(ctx, id) }

// CreateWorkspace creates a workspace and its volume now.
func (b Manager) CreateWorkspace(ctx context.Context, spec sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error) {
	return b.M.CreateWorkspace(ctx, spec)
}

// Workspace describes a workspace.
func (b Manager) Workspace(ctx context.Context, id string) (*sandboxes.Workspace, error) {
	return b.M.Workspace(ctx, id)
}

// Workspaces lists owner's workspaces.
func (b Manager) Workspaces(ctx context.Context, owner string) ([]*sandboxes.Workspace, error) {
	return b.M.Workspaces(ctx, owner)
}

// DeleteWorkspace deletes a workspace nothing mounts.
func (b Manager) DeleteWorkspace(ctx context.Context, id string) error {
	return b.M.DeleteWorkspace(ctx, id)
}

// Profiles lists the profiles.
func (b Manager) Profiles() []sandboxes.Profile { return b.M.Profiles() }

// ExtendTTL pushes back a sandbox's expiry.
func (b Manager) ExtendTTL(ctx context.Context, id string, by time.Duration) (sandboxes.Sandbox, error) {
	return deref(b.M.ExtendTTL(ctx, id, by))
}

func (b Manager) Pause(ctx context.Context, id string) (sandboxes.Sandbox, error) {
	return deref(b.M.Pause(ctx, id))
}

func (b Manager) Resume(ctx context.Context, id string) (sandboxes.Sandbox, error) {
	return deref(b.M.Resume(ctx, id))
}

func (b Manager) CreateSnapshot(ctx context.Context, id string, req sandboxes.SnapshotRequest) (sandboxes.Snapshot, error) {
	return deref(b.M.CreateSnapshot(ctx, id, req))
}

func (b Manager) Snapshots(ctx context.Context, owner string) ([]sandboxes.Snapshot, error) {
	return b.M.Snapshots(ctx, owner)
}

func (b Manager) GetSnapshot(ctx context.Context, id string) (sandboxes.Snapshot, error) {
	return deref(b.M.GetSnapshot(ctx, id))
}

func (b Manager) DeleteSnapshot(ctx context.Context, id string) error {
	return b.M.DeleteSnapshot(ctx, id)
}

func (b Manager) CreateFromSnapshot(ctx context.Context, req sandboxes.CreateRequest, snapshotID string) (sandboxes.Sandbox, sandboxes.CopyStats, error) {
	sb, stats, err := b.M.CreateFromSnapshot(ctx, req, snapshotID)
	if err != nil {
		return sandboxes.Sandbox{}, stats, err
	}
	return *sb, stats, nil
}

func (b Manager) Fork(ctx context.Context, id string, req sandboxes.ForkRequest) (sandboxes.Sandbox, sandboxes.CopyStats, error) {
	res, err := b.M.Fork(ctx, id, req)
	if err != nil {
		return sandboxes.Sandbox{}, sandboxes.CopyStats{}, err
	}
	return *res.Sandbox, res.Copy, nil
}

func deref[T any](v *T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return *v, nil
}

var (
	_ Sandboxes   = Manager{}
	_ Pauser      = Manager{}
	_ Snapshotter = Manager{}
)

// CheckAgentLoss records the death of a sandbox whose agent call failed in transport when its container is gone.
func (b Manager) CheckAgentLoss(ctx context.Context, id string) error {
	return b.M.CheckAgentLoss(ctx, id)
}
