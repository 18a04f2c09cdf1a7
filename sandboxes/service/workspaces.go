package service

import (
	"context"

	"github.com/sandgate/sandgate/sandboxes"
)

// Workspaces (Bay's cargos) as a caller sees them: its own, or every owner's for an admin. The in-use check and
// the volume are the Manager's.

// CreateWorkspace makes a workspace of p's and its volume now.
func (s *Service) CreateWorkspace(ctx context.Context, p Principal, spec sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error) {
	spec.Owner = p.Owner
	return s.cfg.Sandboxes.CreateWorkspace(ctx, spec)
}

// Workspaces lists the workspaces p may see, in id order.
func (s *Service) Workspaces(ctx context.Context, p Principal) ([]*sandboxes.Workspace, error) {
	return s.cfg.Sandboxes.Workspaces(ctx, p.listOwner())
}

// Workspace fetches a workspace p may see; another owner's does not exist for p (not_found, "Cargo not found").
func (s *Service) Workspace(ctx context.Context, p Principal, id string) (*sandboxes.Workspace, error) {
	w, err := s.cfg.Sandboxes.Workspace(ctx, id)
	if err != nil && AsError(err).Code != CodeNotFound {
		return nil, err
	}
	if err != nil || w == nil || !p.Sees(w.Owner) {
		return nil, Errorf(CodeNotFound, "Cargo not found: %s", id)
	}
	return w, nil
}

// DeleteWorkspace deletes a workspace p may see; it fails with the Manager's sandboxes.CodeWorkspaceInUse while
// live sandboxes mount it.
func (s *Service) DeleteWorkspace(ctx context.Context, p Principal, id string) error {
	if _, err := s.Workspace(ctx, p, id); err != nil {
		return err
	}
	return s.cfg.Sandboxes.DeleteWorkspace(ctx, id)
}
