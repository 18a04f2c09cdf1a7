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
}

// CreateLabelled creates a sandbox owned by p, its workspace listed as Config.ManagedWorkspace says.
func (s *Service) CreateLabelled(ctx context.Context, p Principal, c LabelledCreate) (sandboxes.Sandbox, error) {
	if c.TTL < 0 {
		return sandboxes.Sandbox{}, Errorf(CodeValidation, "ttl must not be negative")
	}
	req := sandboxes.CreateRequest{Profile: c.Profile, Owner: p.Owner, TTL: -1, Metadata: c.Metadata, Egress: c.Egress,
		UnguessableID: c.UnguessableID, RecordWorkspace: s.cfg.ManagedWorkspace}
	if c.TTL > 0 {
		req.TTL = c.TTL
	}
	if c.Snapshot != "" {
		if _, err := s.GetSnapshot(ctx, p, c.Snapshot); err != nil {
			return sandboxes.Sandbox{}, err
		}
		sn, _ := s.snapshotter() // GetSnapshot checked it
		sb, _, err := sn.CreateFromSnapshot(ctx, req, c.Snapshot)
		return sb, err
	}
	return s.cfg.Sandboxes.Create(ctx, req)
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
	sb, _, err := sn.Fork(ctx, id, sandboxes.ForkRequest{TTL: ttl, RecordWorkspace: s.cfg.ManagedWorkspace,
		Metadata: metadata, UnguessableID: unguessable})
	return sb, err
}

// TTLSetter is implemented by a Manager that sets a sandbox's expiry outright.
type TTLSetter interface {
	SetTTL(ctx context.Context, id string, ttl time.Duration) (sandboxes.Sandbox, error)
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
	return ts.SetTTL(ctx, id, ttl)
}

// UsageReader is implemented by a Manager that reports running sandboxes' resource use.
type UsageReader interface {
	Usage(ctx context.Context, ids []string) map[string]sandboxes.Usage
}

// Usage reports the resource use of a sandbox p may see; ok is false when it is not running or the engine
// reports none.
func (s *Service) Usage(ctx context.Context, p Principal, id string) (sandboxes.Usage, bool, error) {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return sandboxes.Usage{}, false, err
	}
	ur, ok := s.cfg.Sandboxes.(UsageReader)
	if !ok {
		return sandboxes.Usage{}, false, nil
	}
	u, ok := ur.Usage(ctx, []string{id})[id]
	return u, ok, nil
}

// AccessKeyer is implemented by a Manager that derives per-sandbox keys (an HMAC of the id under the sandbox's
// own secret): valid while the sandbox exists, nothing stored.
type AccessKeyer interface {
	AccessKey(id, purpose string) (string, error)
}

// AccessKey derives the key of purpose for a sandbox p may see; a dialect hands it to p and checks it at its edge
// with SandboxAccessKey.
func (s *Service) AccessKey(ctx context.Context, p Principal, id, purpose string) (string, error) {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return "", err
	}
	return s.SandboxAccessKey(id, purpose)
}

// SandboxAccessKey derives a sandbox's key of purpose with no caller: for an edge that admits a request by that
// key alone, comparing in constant time.
func (s *Service) SandboxAccessKey(id, purpose string) (string, error) {
	ak, ok := s.cfg.Sandboxes.(AccessKeyer)
	if !ok {
		return "", Errorf(CodeCapability, "per-sandbox access keys are not available on this gateway")
	}
	return ak.AccessKey(id, purpose)
}

// SetTTL sets a sandbox's expiry from now.
func (b Manager) SetTTL(ctx context.Context, id string, ttl time.Duration) (sandboxes.Sandbox, error) {
	return deref(b.M.SetTTL(ctx, id, ttl))
}

// Usage reads running sandboxes' resource use.
func (b Manager) Usage(ctx context.Context, ids []string) map[string]sandboxes.Usage {
	return b.M.Usage(ctx, ids)
}

// AccessKey derives a per-sandbox key.
func (b Manager) AccessKey(id, purpose string) (string, error) { return b.M.AccessKey(id, purpose) }

var (
	_ TTLSetter   = Manager{}
	_ UsageReader = Manager{}
	_ AccessKeyer = Manager{}
)
