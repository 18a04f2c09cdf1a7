package service

import (
	"context"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Pause, resume, snapshots and fork: pass-throughs to the Manager with the owner scoping of every operation. A
// Manager that lacks them answers capability_not_supported.

// Pauser is implemented by a Manager that can freeze and thaw sandboxes.
type Pauser interface {
	Pause(ctx context.Context, id string) (*sandboxes.Sandbox, error)
	Resume(ctx context.Context, id string) (*sandboxes.Sandbox, error)
}

// Snapshotter is implemented by a Manager that keeps workspace snapshots.
type Snapshotter interface {
	CreateSnapshot(ctx context.Context, id string, req sandboxes.SnapshotRequest) (*sandboxes.Snapshot, error)
	// Snapshots lists owner's snapshots ("" lists every owner's), newest first.
	Snapshots(ctx context.Context, owner string) ([]sandboxes.Snapshot, error)
	GetSnapshot(ctx context.Context, id string) (*sandboxes.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
	CreateFromSnapshot(ctx context.Context, req sandboxes.CreateRequest, snapshotID string) (*sandboxes.Sandbox, sandboxes.CopyStats, error)
	Fork(ctx context.Context, id string, req sandboxes.ForkRequest) (*sandboxes.ForkResult, error)
}

// CanPause is nil when the Manager pauses sandboxes, else capability_not_supported (a dialect that starts the
// sandbox before it pauses, as E2B's does, asks first so a gateway without the capability starts nothing).
func (s *Service) CanPause() error {
	_, err := s.pauser()
	return err
}

// CanSnapshot is nil when the Manager keeps snapshots, else capability_not_supported (a dialect checks before it
// reads a request body, so a gateway without the capability says so first).
func (s *Service) CanSnapshot() error {
	_, err := s.snapshotter()
	return err
}

func (s *Service) pauser() (Pauser, error) {
	p, ok := s.cfg.Sandboxes.(Pauser)
	if !ok {
		return nil, Errorf(CodeCapability, "pause is not available on this gateway").With("capability", "pause").With("available", []string{})
	}
	return p, nil
}

func (s *Service) snapshotter() (Snapshotter, error) {
	sn, ok := s.cfg.Sandboxes.(Snapshotter)
	if !ok {
		return nil, Errorf(CodeCapability, "snapshots are not available on this gateway").With("capability", "snapshots").With("available", []string{})
	}
	return sn, nil
}

// Pause freezes the processes of a sandbox p owns (memory, processes and PTYs kept; the TTL keeps running).
func (s *Service) Pause(ctx context.Context, p Principal, id string) (sandboxes.Sandbox, error) {
	pr, err := s.pauserOf(ctx, p, id)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return deref(pr.Pause(ctx, id))
}

// Resume thaws a paused sandbox p owns.
func (s *Service) Resume(ctx context.Context, p Principal, id string) (sandboxes.Sandbox, error) {
	pr, err := s.pauserOf(ctx, p, id)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return deref(pr.Resume(ctx, id))
}

// pauserOf is the check Pause and Resume share: the Manager pauses sandboxes (asked first, so a gateway without
// the capability says so whatever the sandbox), and id is an unexpired sandbox p owns.
func (s *Service) pauserOf(ctx context.Context, p Principal, id string) (Pauser, error) {
	pr, err := s.pauser()
	if err != nil {
		return nil, err
	}
	if _, err := s.Unexpired(ctx, p, id); err != nil {
		return nil, err
	}
	return pr, nil
}

// CreateSnapshot captures the workspace of a sandbox p owns.
func (s *Service) CreateSnapshot(ctx context.Context, p Principal, id string, req sandboxes.SnapshotRequest) (sandboxes.Snapshot, error) {
	sn, err := s.snapshotter()
	if err != nil {
		return sandboxes.Snapshot{}, err
	}
	if _, err := s.Unexpired(ctx, p, id); err != nil {
		return sandboxes.Snapshot{}, err
	}
	return deref(sn.CreateSnapshot(ctx, id, req))
}

// Snapshots lists the snapshots p may see (an admin sees every owner's), newest first; source "" lists them all,
// else those taken of that sandbox, which may be gone (snapshots outlive it).
func (s *Service) Snapshots(ctx context.Context, p Principal, source string) ([]sandboxes.Snapshot, error) {
	sn, err := s.snapshotter()
	if err != nil {
		return nil, err
	}
	list, err := sn.Snapshots(ctx, p.listOwner())
	if err != nil {
		return nil, err
	}
	out := []sandboxes.Snapshot{}
	for _, snap := range list {
		if source == "" || snap.Source == source {
			out = append(out, snap)
		}
	}
	return out, nil
}

// GetSnapshot fetches a snapshot p may use; another owner's does not exist for p.
func (s *Service) GetSnapshot(ctx context.Context, p Principal, id string) (sandboxes.Snapshot, error) {
	sn, err := s.snapshotter()
	if err != nil {
		return sandboxes.Snapshot{}, err
	}
	snap, err := deref(sn.GetSnapshot(ctx, id))
	if err != nil {
		return snap, err
	}
	if !p.Sees(snap.Owner) {
		return sandboxes.Snapshot{}, Errorf(CodeNotFound, "Snapshot not found: %s", id)
	}
	return snap, nil
}

// DeleteSnapshot deletes a snapshot p may use and frees its storage.
func (s *Service) DeleteSnapshot(ctx context.Context, p Principal, id string) error {
	if _, err := s.GetSnapshot(ctx, p, id); err != nil {
		return err
	}
	sn, _ := s.snapshotter() // GetSnapshot checked it
	return sn.DeleteSnapshot(ctx, id)
}

// Fork creates a sandbox of p's with a copy of the workspace of a sandbox p owns; ttl <= 0 is the profile's.
func (s *Service) Fork(ctx context.Context, p Principal, id string, ttl time.Duration) (sandboxes.Sandbox, sandboxes.CopyStats, error) {
	sn, err := s.snapshotter()
	if err != nil {
		return sandboxes.Sandbox{}, sandboxes.CopyStats{}, err
	}
	if _, err := s.Unexpired(ctx, p, id); err != nil {
		return sandboxes.Sandbox{}, sandboxes.CopyStats{}, err
	}
	if ttl <= 0 {
		ttl = -1
	}
	res, err := sn.Fork(ctx, id, sandboxes.ForkRequest{TTL: ttl, RecordWorkspace: s.cfg.ManagedWorkspace})
	if err != nil {
		return sandboxes.Sandbox{}, sandboxes.CopyStats{}, err
	}
	return *res.Sandbox, res.Copy, nil
}

// CreateFromSnapshot creates a sandbox of p's whose workspace starts as a copy of a snapshot p may use; profile ""
// takes the snapshot's profile, ttl <= 0 the profile's.
func (s *Service) CreateFromSnapshot(ctx context.Context, p Principal, snapshotID, profile string, ttl time.Duration, env map[string]string) (sandboxes.Sandbox, error) {
	if _, err := s.GetSnapshot(ctx, p, snapshotID); err != nil {
		return sandboxes.Sandbox{}, err
	}
	sn, _ := s.snapshotter() // GetSnapshot checked it
	req := sandboxes.CreateRequest{Profile: profile, Owner: p.Owner, TTL: -1, Env: env, RecordWorkspace: s.cfg.ManagedWorkspace}
	if ttl > 0 {
		req.TTL = ttl
	}
	sb, _, err := sn.CreateFromSnapshot(ctx, req, snapshotID)
	return deref(sb, err)
}
