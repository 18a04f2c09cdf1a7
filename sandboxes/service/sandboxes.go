package service

import (
	"context"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Sandboxes is what the operations need of the lifecycle Manager.
type Sandboxes interface {
	Create(ctx context.Context, req sandboxes.CreateRequest) (sandboxes.Sandbox, error)
	Get(ctx context.Context, id string) (sandboxes.Sandbox, error)
	// List returns one page and the cursor of the next ("" when it was the last).
	List(ctx context.Context, opts sandboxes.ListOptions) ([]sandboxes.Sandbox, string, error)
	// Hold starts the sandbox's compute if it is idle and returns how to reach its agent, holding a lease until
	// ctx ends so the idle collector never stops the container a request is using. It counts as activity.
	Hold(ctx context.Context, id string) (sandboxes.Target, error)
	Stop(ctx context.Context, id string) error
	Keepalive(ctx context.Context, id string) error
	ExtendTTL(ctx context.Context, id string, by time.Duration) (sandboxes.Sandbox, error)
	Delete(ctx context.Context, id string) error
	Profiles() []sandboxes.Profile
	Workspaces
}

// Workspaces are the Manager's workspaces (Bay's cargos): a volume a caller makes and mounts into sandboxes of
// theirs. Creating, listing and deleting them, the in-use check included, is the Manager's, under its lock.
type Workspaces interface {
	CreateWorkspace(ctx context.Context, spec sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error)
	// Workspace fails with sandboxes.CodeNotFound when there is none.
	Workspace(ctx context.Context, id string) (*sandboxes.Workspace, error)
	// Workspaces lists owner's workspaces ("": everyone's) in id order.
	Workspaces(ctx context.Context, owner string) ([]*sandboxes.Workspace, error)
	// DeleteWorkspace fails with sandboxes.CodeWorkspaceInUse while live sandboxes mount it.
	DeleteWorkspace(ctx context.Context, id string) error
}
