package service

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// CreateParams is a sandbox to create.
type CreateParams struct {
	// Profile is a profile id; "" is DefaultProfile.
	Profile string
	// TTL is the hard lifetime; 0 is the profile's default.
	TTL time.Duration
	// CargoID attaches an existing cargo (workspace) of the caller's.
	CargoID *string
	// Dependencies are installed at start (python, node and r; apt only through a derived image).
	Dependencies *sandboxes.Dependencies
}

// DependenciesEnv checks dependencies asked for at create and returns the environment that hands them to the
// Manager, or nil when there are none.
func DependenciesEnv(d *sandboxes.Dependencies) (map[string]string, error) {
	if d == nil {
		return nil, nil
	}
	if err := d.Validate(); err != nil {
		return nil, Errorf(CodeValidation, "%v", err)
	}
	if len(d.Apt) > 0 {
		return nil, Errorf(CodeValidation, "apt packages cannot be installed at create: the sandbox runs as a non-root "+
			"user on a read-only root filesystem; build a derived image with them (make profile-images) and use it as the profile's image")
	}
	if len(d.Python)+len(d.Node)+len(d.R) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding dependencies: %w", err)
	}
	return map[string]string{sandboxes.EnvDependencies: string(b)}, nil
}

// CreateSandbox creates a sandbox owned by p; without a cargo, the Manager lists the workspace it makes as
// Config.ManagedWorkspace says (Bay's managed cargo).
func (s *Service) CreateSandbox(ctx context.Context, p Principal, cp CreateParams) (sandboxes.Sandbox, error) {
	env, err := DependenciesEnv(cp.Dependencies)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return s.CreateSandboxEnv(ctx, p, cp, env)
}

// CreateSandboxEnv is CreateSandbox once the dependencies are an environment (the REST route reports bad ones as
// FastAPI's 422 before it gets here).
func (s *Service) CreateSandboxEnv(ctx context.Context, p Principal, cp CreateParams, env map[string]string) (sandboxes.Sandbox, error) {
	profile := cp.Profile
	if profile == "" {
		profile = DefaultProfile
	}
	if cp.TTL < 0 {
		return sandboxes.Sandbox{}, Errorf(CodeValidation, "ttl must not be negative")
	}
	var known []string
	found := false
	for _, pr := range s.cfg.Sandboxes.Profiles() {
		known = append(known, pr.ID)
		found = found || pr.ID == profile
	}
	if !found {
		return sandboxes.Sandbox{}, Errorf(CodeValidation, "Invalid profile: %s", profile).With("profile", profile).With("available", known)
	}
	req := sandboxes.CreateRequest{Profile: profile, Owner: p.Owner, TTL: -1, Env: env}
	if cp.TTL > 0 {
		req.TTL = cp.TTL
	}
	if cp.CargoID != nil {
		if err := s.attachable(ctx, p, *cp.CargoID); err != nil {
			return sandboxes.Sandbox{}, err
		}
		req.WorkspaceID = *cp.CargoID
		req.WorkspaceMustExist = true // a cargo deleted meanwhile is not mounted (the Manager decides, under its lock)
	} else {
		req.RecordWorkspace = s.cfg.ManagedWorkspace
	}
	return deref(s.cfg.Sandboxes.Create(ctx, req))
}

// attachable is nil when p may mount workspace (cargo) id: one of p's, or any for an admin. Another owner's
// workspace does not exist for p.
func (s *Service) attachable(ctx context.Context, p Principal, id string) error {
	_, err := s.Workspace(ctx, p, id)
	return err
}

// DeleteSandbox deletes a sandbox and its history; the Manager drops its managed cargo's record with it. It is
// idempotent (Bay's delete): a sandbox that is gone (or was never visible to p) is not an error.
func (s *Service) DeleteSandbox(ctx context.Context, p Principal, id string) error {
	if err := s.Delete(ctx, p, id); err != nil && AsError(err).Code != CodeNotFound {
		return err
	}
	return nil
}

// Delete is DeleteSandbox that reports a sandbox that is not there (another owner's included) as not_found, and
// the Manager's own refusal as it is (OpenSandbox's and the console's delete).
func (s *Service) Delete(ctx context.Context, p Principal, id string) error {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return err
	}
	if err := s.cfg.Sandboxes.Delete(ctx, id); err != nil {
		return err
	}
	if s.cfg.History != nil {
		if err := s.cfg.History.DropHistory(id); err != nil {
			s.cfg.Logger.Warn("dropping history of a deleted sandbox", "sandbox", id, "error", err)
		}
	}
	return nil
}
