package service

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Cargos is the book of workspaces (Bay's cargos) sandboxes are created on: the ones a caller made and may attach,
// and the ones the Manager made for one sandbox, which go when it goes.
type Cargos interface {
	// Attachable is the workspace of cargo id when p may attach it; a missing or another owner's cargo is nil.
	Attachable(p Principal, id string) (workspaceID string, ok bool, err error)
	// RecordManaged notes the workspace the Manager made for sb, a sandbox of owner.
	RecordManaged(sb sandboxes.Sandbox, owner string) error
	// ForgetManaged drops the cargo of a deleted sandbox's workspace if the gateway made it for that sandbox.
	ForgetManaged(workspaceID string) error
}

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

// CreateSandbox creates a sandbox owned by p and records its managed cargo.
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
		ws, ok := "", false
		if s.cfg.Cargos != nil {
			var err error
			if ws, ok, err = s.cfg.Cargos.Attachable(p, *cp.CargoID); err != nil {
				return sandboxes.Sandbox{}, err
			}
		}
		if !ok {
			return sandboxes.Sandbox{}, Errorf(CodeNotFound, "Cargo not found: %s", *cp.CargoID)
		}
		req.WorkspaceID = ws
		req.WorkspaceMustExist = true // a cargo deleted meanwhile is not mounted (the Manager decides, under its lock)
	}
	sb, err := s.cfg.Sandboxes.Create(ctx, req)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	if cp.CargoID == nil {
		s.RecordManaged(sb, p)
	}
	return sb, nil
}

// RecordManaged notes the workspace the Manager made for a new sandbox of p's (a create, a fork, a create from a
// snapshot); a failure to note it is logged, never fails the create.
func (s *Service) RecordManaged(sb sandboxes.Sandbox, p Principal) {
	if sb.WorkspaceID == "" || s.cfg.Cargos == nil {
		return
	}
	if err := s.cfg.Cargos.RecordManaged(sb, p.Owner); err != nil {
		s.cfg.Logger.Warn("recording a managed cargo", "sandbox", sb.ID, "error", err)
	}
}

// DeleteSandbox deletes a sandbox, its history and its managed cargo. It is idempotent: a sandbox that is gone (or
// was never visible to p) is not an error.
func (s *Service) DeleteSandbox(ctx context.Context, p Principal, id string) error {
	sb, err := s.Visible(ctx, p, id)
	if err != nil {
		if AsError(err).Code == CodeNotFound {
			return nil
		}
		return err
	}
	if err := s.cfg.Sandboxes.Delete(ctx, id); err != nil && AsError(err).Code != CodeNotFound {
		return err
	}
	if s.cfg.History != nil {
		if err := s.cfg.History.DropHistory(id); err != nil {
			s.cfg.Logger.Warn("dropping history of a deleted sandbox", "sandbox", id, "error", err)
		}
	}
	if sb.WorkspaceID != "" && s.cfg.Cargos != nil {
		if err := s.cfg.Cargos.ForgetManaged(sb.WorkspaceID); err != nil {
			s.cfg.Logger.Warn("forgetting a managed cargo", "cargo", sb.WorkspaceID, "error", err)
		}
	}
	return nil
}
