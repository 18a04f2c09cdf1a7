package service

import (
	"context"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Operations a dialect needs when it keeps its own state with the sandbox (E2B's tokens flag, envs and template
// name live in the sandbox's metadata in the one store, owner-scoped with it), sets the expiry outright, reads
// usage, or wants ids that alone may open a port. A Manager that lacks one answers capability_not_supported.

// LabelledCreate is a create with what CreateParams does not carry.
type LabelledCreate struct {
	// Profile is a profile id (required here: the dialect maps its own names).
	Profile string
	// TTL is the hard lifetime; 0 is the profile's default.
	TTL time.Duration
	// Metadata labels the sandbox (the dialect's reserved keys included).
	Metadata map[string]string
	// Egress narrows the sandbox's outbound traffic inside its profile's.
	Egress *sandboxes.SandboxEgress
	// UnguessableID asks for an id of 128 random bits without '-' (sandboxes.CreateRequest.UnguessableID).
	UnguessableID bool
	// Snapshot, when set, starts the workspace as a copy of this snapshot of the caller's.
	Snapshot string
	// OnExpire is what the TTL does: "" deletes the sandbox, sandboxes.ExpirePause freezes it and
	// sandboxes.ExpireStop stops it, kept for the Manager's retention until it resumes (E2B's autoPause).
	OnExpire string
}

// CreateLabelled creates a sandbox owned by p, its workspace listed as Config.ManagedWorkspace says.
func (s *Service) CreateLabelled(ctx context.Context, p Principal, c LabelledCreate) (sandboxes.Sandbox, error) {
	if c.TTL < 0 {
		return sandboxes.Sandbox{}, Errorf(CodeValidation, "ttl must not be negative")
	}
	req := sandboxes.CreateRequest{Profile: c.Profile, Owner: p.Owner, TTL: -1, Metadata: c.Metadata, Egress: c.Egress,
		UnguessableID: c.UnguessableID, RecordWorkspace: s.cfg.ManagedWorkspace, OnExpire: c.OnExpire}
	if c.TTL > 0 {
		req.TTL = c.TTL
	}
	if c.Snapshot != "" {
		if _, err := s.GetSnapshot(ctx, p, c.Snapshot); err != nil {
			return sandboxes.Sandbox{}, err
		}
		sn, _ := s.snapshotter() // GetSnapshot checked it
		sb, _, err := sn.CreateFromSnapshot(ctx, req, c.Snapshot)
		return deref(sb, err)
	}
	return deref(s.cfg.Sandboxes.Create(ctx, req))
}

// ForkLabelled forks a sandbox p owns as Fork does, the new one labelled with metadata and, when asked, an
// unguessable id.
func (s *Service) ForkLabelled(ctx context.Context, p Principal, id string, ttl time.Duration, metadata map[string]string, unguessable bool) (sandboxes.Sandbox, error) {
	sn, err := s.snapshotter()
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	if _, err := s.Unexpired(ctx, p, id); err != nil {
		return sandboxes.Sandbox{}, err
	}
	if ttl <= 0 {
		ttl = -1
	}
	res, err := sn.Fork(ctx, id, sandboxes.ForkRequest{TTL: ttl, RecordWorkspace: s.cfg.ManagedWorkspace,
		Metadata: metadata, UnguessableID: unguessable})
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return *res.Sandbox, nil
}

// TTLSetter is implemented by a Manager that sets a sandbox's expiry outright.
type TTLSetter interface {
	SetTTL(ctx context.Context, id string, ttl time.Duration) (*sandboxes.Sandbox, error)
}

// SetTTL makes a sandbox p owns expire ttl from now (earlier or later than before).
func (s *Service) SetTTL(ctx context.Context, p Principal, id string, ttl time.Duration) (sandboxes.Sandbox, error) {
	ts, ok := s.cfg.Sandboxes.(TTLSetter)
	if !ok {
		return sandboxes.Sandbox{}, Errorf(CodeCapability, "setting a sandbox's expiry is not available on this gateway")
	}
	if _, err := s.Unexpired(ctx, p, id); err != nil {
		return sandboxes.Sandbox{}, err
	}
	return deref(ts.SetTTL(ctx, id, ttl))
}

// UsageOf reports the resource use of a sandbox p may see; ok is false when it is not running or the engine
// reports none.
func (s *Service) UsageOf(ctx context.Context, p Principal, id string) (sandboxes.Usage, bool, error) {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return sandboxes.Usage{}, false, err
	}
	u, ok := s.Usage(ctx, []string{id})[id]
	return u, ok, nil
}

// SandboxAccessKey derives a sandbox's key of purpose with no caller: for a dialect that hands the key out at
// create (E2B's envd and traffic tokens) and for an edge that compares it itself. AccessKeyValid is the check for
// an edge that only needs a yes or no.
func (s *Service) SandboxAccessKey(id, purpose string) (string, error) {
	ak, err := s.accessKeyer()
	if err != nil {
		return "", err
	}
	return ak.AccessKey(id, purpose)
}

var _ TTLSetter = (*sandboxes.Manager)(nil)
