package caddymodule

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// managerBackend adapts the lifecycle Manager to the API's consumer interface.
type managerBackend struct {
	m    *sandboxes.Manager
	vols *volumeRemover
}

// volumeRemover removes the Docker volume of a deleted cargo. The Manager only removes workspaces it created for
// one sandbox; a cargo's volume outlives its sandboxes until the cargo itself is deleted. The engine client is
// made on first use and closed at Cleanup.
type volumeRemover struct {
	newDriver func() (sandboxes.Driver, error)
	mu        sync.Mutex
	drv       sandboxes.Driver
}

func (v *volumeRemover) remove(ctx context.Context, name string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.drv == nil {
		drv, err := v.newDriver()
		if err != nil {
			return fmt.Errorf("connecting to the engine: %w", err)
		}
		v.drv = drv
	}
	if err := v.drv.RemoveVolume(ctx, name); err != nil {
		return fmt.Errorf("removing volume %s: %w", name, err)
	}
	return nil
}

func (v *volumeRemover) close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.drv == nil {
		return nil
	}
	err := v.drv.Close()
	v.drv = nil
	return err
}

// CreateWorkspace creates a cargo's volume now (bayapi.WorkspaceCreator).
func (b managerBackend) CreateWorkspace(ctx context.Context, workspaceID string) error {
	return b.m.CreateWorkspace(ctx, workspaceID)
}

// RemoveWorkspace removes a cargo's volume (bayapi.WorkspaceRemover).
func (b managerBackend) RemoveWorkspace(ctx context.Context, workspaceID string) error {
	if b.vols == nil {
		return nil
	}
	return b.vols.remove(ctx, b.m.VolumeName(workspaceID))
}

func (b managerBackend) Create(ctx context.Context, req sandboxes.CreateRequest) (sandboxes.Sandbox, error) {
	sb, err := b.m.Create(ctx, req)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return *sb, nil
}

func (b managerBackend) Get(ctx context.Context, id string) (sandboxes.Sandbox, error) {
	sb, err := b.m.Get(ctx, id)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return *sb, nil
}

func (b managerBackend) List(ctx context.Context, opts sandboxes.ListOptions) ([]sandboxes.Sandbox, string, error) {
	list, next, err := b.m.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	out := make([]sandboxes.Sandbox, 0, len(list))
	for _, sb := range list {
		out = append(out, *sb)
	}
	return out, next, nil
}

func (b managerBackend) Hold(ctx context.Context, id string) (sandboxes.Target, error) {
	return b.m.Hold(ctx, id)
}

func (b managerBackend) Stop(ctx context.Context, id string) error { return b.m.Stop(ctx, id) }
func (b managerBackend) Keepalive(ctx context.Context, id string) error {
	return b.m.Keepalive(ctx, id)
}
func (b managerBackend) Delete(ctx context.Context, id string) error { return b.m.Delete(ctx, id) }
func (b managerBackend) Profiles() []sandboxes.Profile               { return b.m.Profiles() }

func (b managerBackend) ExtendTTL(ctx context.Context, id string, by time.Duration) (sandboxes.Sandbox, error) {
	sb, err := b.m.ExtendTTL(ctx, id, by)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return *sb, nil
}
