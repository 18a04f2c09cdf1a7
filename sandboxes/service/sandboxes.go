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
}
