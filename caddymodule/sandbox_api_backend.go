package caddymodule

import (
	"context"
	"fmt"
	"sync"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// managerBackend is the service's Manager plus the cargo volumes the API creates and removes.
type managerBackend struct {
	service.Manager
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
