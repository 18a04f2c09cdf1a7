package bayapi

import (
	"context"
)

// WorkspaceCreator is implemented by a Manager that creates a cargo's volume at once, as Bay does.
type WorkspaceCreator interface {
	CreateWorkspace(ctx context.Context, workspaceID string) error
}

// WorkspaceRemover is implemented by a Manager that can remove an unused workspace volume (a deleted cargo).
type WorkspaceRemover interface {
	RemoveWorkspace(ctx context.Context, workspaceID string) error
}
