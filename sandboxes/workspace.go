package sandboxes

import (
	"context"
	"fmt"
)

// CreateWorkspace creates the volume of a caller-named workspace now (Bay creates a cargo's volume at once), so it
// exists, with its labels, before any sandbox mounts it. It is not swept as an orphan: it belongs to the caller
// until they remove it. Creating an existing workspace is not an error.
func (m *Manager) CreateWorkspace(ctx context.Context, workspaceID string) error {
	if !workspacePattern.MatchString(workspaceID) {
		return Errorf(CodeInvalid, "workspace_id %q is not a workspace id (ws-<hex>)", workspaceID)
	}
	m.mu.RLock()
	running := m.started && !m.closed
	m.mu.RUnlock()
	if !running {
		return Errorf(CodeEngine, "the sandbox manager is not running")
	}
	rec := Record{WorkspaceID: workspaceID, ManagedWorkspace: false}
	if err := m.driver.CreateVolume(ctx, m.VolumeName(workspaceID), m.volumeLabels(rec)); err != nil {
		return &Error{Code: CodeEngine, Message: fmt.Sprintf("creating workspace volume %s", m.VolumeName(workspaceID)), Err: err}
	}
	return nil
}
