package bayapi

import (
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// CargoBook is the service's book of workspaces over the store's cargos: a caller attaches its own cargos, and the
// workspace the Manager makes for one sandbox is recorded as a managed cargo that goes with the sandbox.
type CargoBook struct {
	Store *sandboxes.BoltStore
	Now   func() time.Time
}

// Attachable is the workspace of cargo id when p may attach it.
func (b CargoBook) Attachable(p service.Principal, id string) (string, bool, error) {
	c, err := b.Store.Cargo(id)
	if err != nil || c == nil || (!p.Admin && c.Owner != p.Owner) {
		return "", false, err
	}
	return c.ID, true, nil
}

// RecordManaged records sb's workspace as a cargo managed by sb.
func (b CargoBook) RecordManaged(sb sandboxes.Sandbox, owner string) error {
	now := b.Now().UTC()
	sid := sb.ID
	return b.Store.PutCargo(&sandboxes.Workspace{
		ID: sb.WorkspaceID, Owner: owner, Managed: true, ManagedBySandboxID: &sid, Backend: cargoBackend,
		SizeLimitMB: defaultCargoMB, CreatedAt: now, LastAccessedAt: now,
	})
}

// ForgetManaged deletes the cargo of workspaceID if it is managed (a cargo the caller made stays).
func (b CargoBook) ForgetManaged(workspaceID string) error {
	c, err := b.Store.Cargo(workspaceID)
	if err != nil || c == nil || !c.Managed {
		return nil // as before: an unreadable cargo is left for the reaper, not reported
	}
	return b.Store.DeleteCargo(c.ID)
}

var _ service.Cargos = CargoBook{}
