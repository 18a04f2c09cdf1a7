package caddymodule

import (
	"context"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Pause, resume, snapshots and fork of the API, adapted onto the Manager (sandboxes/pause.go, snapshots.go).

func (b managerBackend) Pause(ctx context.Context, id string) (sandboxes.Sandbox, error) {
	return deref(b.m.Pause(ctx, id))
}

func (b managerBackend) Resume(ctx context.Context, id string) (sandboxes.Sandbox, error) {
	return deref(b.m.Resume(ctx, id))
}

func (b managerBackend) CreateSnapshot(ctx context.Context, id string, req sandboxes.SnapshotRequest) (sandboxes.Snapshot, error) {
	return deref(b.m.CreateSnapshot(ctx, id, req))
}

func (b managerBackend) Snapshots(ctx context.Context, owner string) ([]sandboxes.Snapshot, error) {
	return b.m.Snapshots(ctx, owner)
}

func (b managerBackend) GetSnapshot(ctx context.Context, id string) (sandboxes.Snapshot, error) {
	return deref(b.m.GetSnapshot(ctx, id))
}

func (b managerBackend) DeleteSnapshot(ctx context.Context, id string) error {
	return b.m.DeleteSnapshot(ctx, id)
}

func (b managerBackend) CreateFromSnapshot(ctx context.Context, req sandboxes.CreateRequest, snapshotID string) (sandboxes.Sandbox, sandboxes.CopyStats, error) {
	sb, stats, err := b.m.CreateFromSnapshot(ctx, req, snapshotID)
	if err != nil {
		return sandboxes.Sandbox{}, stats, err
	}
	return *sb, stats, nil
}

func (b managerBackend) Fork(ctx context.Context, id string, ttl time.Duration) (sandboxes.Sandbox, sandboxes.CopyStats, error) {
	res, err := b.m.Fork(ctx, id, ttl)
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
	_ service.Pauser      = managerBackend{}
	_ service.Snapshotter = managerBackend{}
)
