package service

import (
	"context"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Sandboxes is what the operations need of the lifecycle Manager, in the Manager's own signatures: the gateway
// passes its *sandboxes.Manager as it is. The service is the only caller of these methods outside the core and the
// edge library (boundary_test.go, TestDialectsTakeTheRoad).
type Sandboxes interface {
	Create(ctx context.Context, req sandboxes.CreateRequest) (*sandboxes.Sandbox, error)
	Get(ctx context.Context, id string) (*sandboxes.Sandbox, error)
	// List returns one page and the cursor of the next ("" when it was the last).
	List(ctx context.Context, opts sandboxes.ListOptions) ([]*sandboxes.Sandbox, string, error)
	// Hold starts the sandbox's compute if it is idle and returns how to reach its agent, holding a lease until
	// ctx ends so the idle collector never stops the container a request is using. It counts as activity.
	Hold(ctx context.Context, id string) (sandboxes.Target, error)
	Stop(ctx context.Context, id string) error
	Keepalive(ctx context.Context, id string) error
	ExtendTTL(ctx context.Context, id string, by time.Duration) (*sandboxes.Sandbox, error)
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

// The Manager's further surfaces, each optional (a Sandboxes without one answers capability_not_supported):
// *sandboxes.Manager has them all.
type (
	// MetadataPatcher merges a patch into a sandbox's tenant metadata (OpenSandbox's PATCH).
	MetadataPatcher interface {
		PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*sandboxes.Sandbox, error)
	}
	// AccessKeyer derives a per-sandbox key for one purpose (OpenSandbox's proxy keys).
	AccessKeyer interface {
		AccessKey(id, purpose string) (string, error)
	}
	// Subscriber streams the lifecycle's events (the console's live list).
	Subscriber interface {
		Subscribe(buffer int) (<-chan sandboxes.Event, func())
	}
	// UsageSource reports the resource use of running sandboxes by id (the console's list).
	UsageSource interface {
		Usage(ctx context.Context, ids []string) map[string]sandboxes.Usage
	}
	// LogSource reads a sandbox's container output (E2B's logs).
	LogSource interface {
		Logs(ctx context.Context, id string, q sandboxes.LogQuery) ([]sandboxes.LogLine, error)
	}
	// EgressSetter replaces a running sandbox's own egress policy (E2B's updateNetwork).
	EgressSetter interface {
		SetEgress(ctx context.Context, id string, eg *sandboxes.SandboxEgress) (*sandboxes.Sandbox, error)
	}
)

var _ interface {
	Sandboxes
	Pauser
	Snapshotter
	MetadataPatcher
	AccessKeyer
	Subscriber
	UsageSource
	LogSource
	EgressSetter
	agentLossChecker
	leaser
	operatorView
} = (*sandboxes.Manager)(nil)

// deref turns the Manager's pointer answers into the values the operations return.
func deref[T any](v *T, err error) (T, error) {
	if err != nil || v == nil {
		var zero T
		return zero, err
	}
	return *v, nil
}
