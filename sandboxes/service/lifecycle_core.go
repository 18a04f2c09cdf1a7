package service

import (
	"context"

	"github.com/sandgate/sandgate/sandboxes"
)

// The lifecycle operations of the dialects that speak the core's own create request (OpenSandbox, the console):
// the same owner rule and the same Manager calls as Bay's, without Bay's defaults.

// Create creates a sandbox owned by p from the core's request as it is (its Owner is p's whatever it says).
func (s *Service) Create(ctx context.Context, p Principal, req sandboxes.CreateRequest) (sandboxes.Sandbox, error) {
	req.Owner = p.Owner
	return deref(s.cfg.Sandboxes.Create(ctx, req))
}

// PatchMetadata merges patch into the tenant metadata of a sandbox p may see (a nil value deletes a key).
func (s *Service) PatchMetadata(ctx context.Context, p Principal, id string, patch map[string]*string) (sandboxes.Sandbox, error) {
	mp, ok := s.cfg.Sandboxes.(MetadataPatcher)
	if !ok {
		return sandboxes.Sandbox{}, Errorf(CodeCapability, "metadata is not kept on this gateway").With("capability", "metadata").With("available", []string{})
	}
	if _, err := s.Visible(ctx, p, id); err != nil {
		return sandboxes.Sandbox{}, err
	}
	return deref(mp.PatchMetadata(ctx, id, patch))
}
