package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Snapshots are owner-scoped, named copies of a sandbox's workspace, stored by the gateway as volumes of their
// own: they outlive the sandbox they came from and gateway restarts, and new sandboxes start from a copy of one.
// A capture of a running sandbox is consistent: its processes are frozen for the copy (pause, capture, resume).
// Fork is the same copy straight into the workspace of a new sandbox.

// SnapshotKind says what a snapshot holds. Only workspace snapshots exist today; a memory checkpoint (CRIU) would
// be another kind, stored beside the workspace copy and restored by a driver that can, without changing the API.
type SnapshotKind string

const (
	// SnapshotWorkspace holds the files of /workspace. Our profiles' root filesystems are read-only (their writable
	// tmpfs mounts are memory), so the workspace is every byte a sandbox can keep.
	SnapshotWorkspace SnapshotKind = "workspace"
)

// Copy methods a CopyStats reports.
const (
	CopyReflink  = "reflink"  // every file shares extents with its source (FICLONE on XFS or btrfs)
	CopyStreamed = "streamed" // bytes were copied (copy_file_range) because the filesystem has no reflinks
)

// CopyStats is what one workspace copy did.
type CopyStats struct {
	Bytes    int64         `json:"bytes"`
	Files    int64         `json:"files"`
	Dirs     int64         `json:"dirs"`
	Skipped  int64         `json:"skipped,omitempty"` // sockets and device nodes, which cannot be copied
	Method   string        `json:"method"`
	Duration time.Duration `json:"duration_ns"`
}

// VolumeCopier is what a Driver offers when it can copy a volume's files into a new volume (sandboxes/docker
// does it on the engine host's disk). The Manager asks for it with a type assertion.
type VolumeCopier interface {
	// CopyVolume creates dst with labels (or takes it empty as the Driver's CreateVolume just made it) and copies
	// src's files into it; limit > 0 fails with ErrSnapshotTooLarge past that many bytes. A failed copy leaves no dst.
	CopyVolume(ctx context.Context, src, dst string, labels map[string]string, limit int64) (CopyStats, error)
}

var (
	// ErrSnapshotTooLarge is returned (wrapped) by a copy that would exceed its byte limit.
	ErrSnapshotTooLarge = errors.New("snapshot exceeds its size limit")
	// ErrWorkspaceFull is returned (wrapped) by a copy into a size-limited volume that does not fit in it (ENOSPC).
	ErrWorkspaceFull = errors.New("the copy does not fit in the workspace's size limit")
	// ErrVolumesUnreachable is returned (wrapped) when the gateway cannot reach the engine's volume data.
	ErrVolumesUnreachable = errors.New("the gateway cannot reach the engine's volume data (snapshots need the gateway on the engine host, as root)")
)

// SnapshotLimits bounds stored snapshots. Zero values take the defaults.
type SnapshotLimits struct {
	// MaxBytes caps one snapshot. Default 10 GiB.
	MaxBytes int64
	// QuotaBytes caps the bytes of all snapshots of one owner. Default 20 GiB.
	QuotaBytes int64
	// MaxPerOwner caps how many snapshots one owner keeps. Default 50.
	MaxPerOwner int
}

func (l SnapshotLimits) withDefaults() SnapshotLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 10 << 30
	}
	if l.QuotaBytes <= 0 {
		l.QuotaBytes = 20 << 30
	}
	if l.MaxPerOwner <= 0 {
		l.MaxPerOwner = 50
	}
	return l
}

// Snapshot is one stored snapshot.
type Snapshot struct {
	ID     string       `json:"id"`
	Name   string       `json:"name"`
	Owner  string       `json:"owner"`
	Kind   SnapshotKind `json:"kind"`
	Source string       `json:"source_sandbox_id"`
	// Profile is the source's profile: a sandbox created from the snapshot without a profile gets this one.
	Profile   string    `json:"profile"`
	SizeBytes int64     `json:"size_bytes"`
	Files     int64     `json:"files"`
	Method    string    `json:"copy_method"`
	CreatedAt time.Time `json:"created_at"`
	// Volume is where the copy lives (internal; the API does not show it).
	Volume string `json:"volume"`
}

// SnapshotRequest asks for a snapshot of a sandbox.
type SnapshotRequest struct {
	// Name is the owner's label for it (1-128 printable characters); "" names it after its id.
	Name string
	// Kind is "" or workspace.
	Kind SnapshotKind
}

// SnapshotStore is implemented by a Store that keeps snapshot records (BoltStore does, in a bucket of its own).
type SnapshotStore interface {
	LoadSnapshots() ([]Snapshot, error)
	PutSnapshot(s Snapshot) error
	DeleteSnapshot(id string) error
}

// ForkRequest asks for a fork of a sandbox.
type ForkRequest struct {
	// TTL is the fork's hard lifetime as CreateRequest.TTL has it: 0 is the manager's default, negative never.
	TTL time.Duration
	// RecordWorkspace lists the fork's workspace as CreateRequest.RecordWorkspace does.
	RecordWorkspace *WorkspaceSpec
	// Metadata labels the fork (the source's are not copied); UnguessableID is CreateRequest's.
	Metadata      map[string]string
	UnguessableID bool
}

// ForkResult is a new sandbox made from another's workspace, and how the copy was made.
type ForkResult struct {
	Sandbox *Sandbox
	Copy    CopyStats
}

// Error codes of snapshots.
const (
	CodeSnapshotNotFound = "snapshot_not_found"
	CodeSnapshotTooLarge = "snapshot_too_large"
)

var snapshotIDPattern = regexp.MustCompile(`^snap-[0-9a-f]{12}$`)

func snapshotNotFound(id string) error {
	return &Error{Code: CodeSnapshotNotFound, Message: fmt.Sprintf("snapshot %s not found", id)}
}

// ValidateSnapshotName checks an owner-chosen snapshot name.
func ValidateSnapshotName(name string) error {
	if name == "" {
		return nil
	}
	if len(name) > 128 || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Errorf(CodeInvalid, "snapshot name: at most 128 printable characters")
	}
	return nil
}

func (m *Manager) snapshotBackends() (VolumeCopier, SnapshotStore, error) {
	vc, ok := m.driver.(VolumeCopier)
	if !ok {
		return nil, nil, &Error{Code: CodeCapabilityAbsent, Message: "this container engine cannot copy workspaces", Details: map[string]any{"capability": "snapshots"}}
	}
	ss, ok := m.store.(SnapshotStore)
	if !ok {
		return nil, nil, &Error{Code: CodeCapabilityAbsent, Message: "this sandbox store cannot keep snapshots", Details: map[string]any{"capability": "snapshots"}}
	}
	return vc, ss, nil
}

// snapshotVolume names the volume of a snapshot id.
func (m *Manager) snapshotVolume(id string) string { return m.mcfg.Namespace + "-" + id }

// CreateSnapshot captures the workspace of sandbox id as a snapshot owned by the sandbox's owner. A sandbox whose
// container runs is frozen for the copy and thawed after it (its requests wait meanwhile), whatever its record
// says; a stopped or paused one is copied as it is. Quotas: the snapshot must fit the per-snapshot limit and its
// owner's remaining quota.
func (m *Manager) CreateSnapshot(ctx context.Context, id string, req SnapshotRequest) (*Snapshot, error) {
	if req.Kind != "" && req.Kind != SnapshotWorkspace {
		return nil, &Error{Code: CodeCapabilityAbsent, Message: fmt.Sprintf("snapshot kind %q is not supported (only %q; memory checkpoints need CRIU, which this host cannot run)", req.Kind, SnapshotWorkspace),
			Details: map[string]any{"capability": "snapshot_kind", "available": []string{string(SnapshotWorkspace)}}}
	}
	if err := ValidateSnapshotName(req.Name); err != nil {
		return nil, err
	}
	vc, ss, err := m.snapshotBackends()
	if err != nil {
		return nil, err
	}
	e, err := m.liveEntry(id)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	owner, profile, ws := e.rec.Owner, e.rec.Profile, e.rec.WorkspaceID
	limits := m.cfg.Snapshots.withDefaults()
	m.mu.RUnlock()

	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	all, err := ss.LoadSnapshots()
	if err != nil {
		return nil, fmt.Errorf("reading snapshots: %w", err)
	}
	var used int64
	n := 0
	for _, s := range all {
		if s.Owner == owner {
			used += s.SizeBytes
			n++
		}
	}
	if n >= limits.MaxPerOwner {
		return nil, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf("owner has %d snapshots, the limit is %d", n, limits.MaxPerOwner),
			Hint: "delete snapshots you no longer need", Details: map[string]any{"scope": "snapshots", "limit": limits.MaxPerOwner}}
	}
	room := limits.QuotaBytes - used
	if room <= 0 {
		return nil, quotaBytesError(used, limits.QuotaBytes)
	}
	limit := min(limits.MaxBytes, room)

	snap := Snapshot{ID: "snap-" + randomHex(6), Name: req.Name, Owner: owner, Kind: SnapshotWorkspace, Source: id,
		Profile: profile, CreatedAt: time.Now().UTC()}
	for _, s := range all {
		for s.ID == snap.ID {
			snap.ID = "snap-" + randomHex(6)
		}
	}
	if snap.Name == "" {
		snap.Name = snap.ID
	}
	snap.Volume = m.snapshotVolume(snap.ID)
	labels := map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance(),
		m.label("snapshot"): snap.ID, m.label(labelOwner): owner, m.label(labelManagedWorkspace): "false"}
	stats, release, err := m.captureWorkspace(ctx, e, vc, m.VolumeName(ws), snap.Volume, labels, limit, false)
	if err != nil {
		if errors.Is(err, ErrSnapshotTooLarge) {
			if limit < limits.MaxBytes {
				return nil, quotaBytesError(used, limits.QuotaBytes)
			}
			return nil, &Error{Code: CodeSnapshotTooLarge, Message: fmt.Sprintf("the workspace is larger than the snapshot limit of %d bytes", limits.MaxBytes),
				Details: map[string]any{"limit_bytes": limits.MaxBytes}, Err: err}
		}
		return nil, err
	}
	snap.SizeBytes, snap.Files, snap.Method = stats.Bytes, stats.Files, stats.Method
	if err := alongside(release, func() error { return ss.PutSnapshot(snap) }); err != nil {
		_ = m.driver.RemoveVolume(context.WithoutCancel(ctx), snap.Volume)
		return nil, fmt.Errorf("recording snapshot %s: %w", snap.ID, err)
	}
	return &snap, nil
}

func quotaBytesError(used, quota int64) error {
	return &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf("owner's snapshots use %d of %d bytes", used, quota),
		Hint: "delete snapshots you no longer need", Details: map[string]any{"scope": "snapshot_bytes", "limit": quota, "used": used}}
}

// captureWorkspace copies e's workspace volume into a new volume dst while nothing can change it: e's engine
// operations are held (no start, stop or delete meanwhile) and a container that can run is frozen for the copy,
// whatever e's record says (mustFreeze). After a successful copy the source is still held: the caller runs release
// (thaw, let go) beside its own next step, a store write, so the two cost the longer of them, and returns only once
// both are done. premade says dst exists already, empty (a spare volume): the source is frozen only for the copy
// itself.
func (m *Manager) captureWorkspace(ctx context.Context, e *entry, vc VolumeCopier, src, dst string, labels map[string]string, limit int64, premade bool) (stats CopyStats, release func(), err error) {
	e.opMu.Lock()
	var thaw func()
	let := func() {
		if thaw != nil {
			thaw()
		}
		e.opMu.Unlock()
	}
	defer func() {
		if err != nil {
			let() // on failure the source is let go before returning
		}
	}()
	m.mu.RLock()
	deleted, phase, cid := e.deleted, e.rec.Phase, e.rec.ContainerID
	m.mu.RUnlock()
	if deleted {
		return CopyStats{}, nil, notFound(e.rec.ID)
	}
	if cid != "" {
		freeze, err := m.mustFreeze(ctx, e, phase, cid)
		if err != nil {
			return CopyStats{}, nil, err
		}
		if freeze {
			pd, err := m.pauser()
			if err != nil {
				return CopyStats{}, nil, err
			}
			// The new volume is made while the source freezes (an engine call and a kernel freeze, neither waiting
			// for the other); the copier finds it made.
			made := make(chan error, 1)
			if premade {
				made <- nil
			} else {
				go func() { made <- m.driver.CreateVolume(ctx, dst, labels) }()
			}
			if err := pd.Pause(ctx, cid); err != nil {
				if <-made == nil {
					_ = m.driver.RemoveVolume(context.WithoutCancel(ctx), dst)
				}
				return CopyStats{}, nil, &Error{Code: CodeEngine, Message: fmt.Sprintf("freezing sandbox %s for a consistent copy", e.rec.ID), Err: err}
			}
			thaw = func() {
				if err := pd.Unpause(context.WithoutCancel(ctx), cid); err != nil {
					m.log.Error("thawing a sandbox after a workspace copy", "sandbox", e.rec.ID, "error", err)
				}
			}
			if err := <-made; err != nil {
				return CopyStats{}, nil, &Error{Code: CodeEngine, Message: fmt.Sprintf("creating the volume for a copy of sandbox %s", e.rec.ID), Err: err}
			}
		}
	}
	stats, err = vc.CopyVolume(ctx, src, dst, labels, limit)
	if err != nil {
		if errors.Is(err, ErrSnapshotTooLarge) {
			return stats, nil, err
		}
		return stats, nil, copyFailed(fmt.Sprintf("copying the workspace of sandbox %s", e.rec.ID), err)
	}
	return stats, let, nil
}

// copyFailed is the typed error of a failed workspace copy: quota_exceeded (scope workspace_size) when the files
// did not fit the destination's size limit, an engine error otherwise.
func copyFailed(what string, err error) error {
	if errors.Is(err, ErrWorkspaceFull) {
		return &Error{Code: CodeQuotaExceeded, Message: what + ": the files do not fit the workspace's size limit",
			Details: map[string]any{"scope": "workspace_size"}, Err: err}
	}
	return &Error{Code: CodeEngine, Message: what, Err: err}
}

// mustFreeze says whether e's container must be frozen for a copy of its workspace: whenever its processes can
// run, whatever the record's phase says. A record can lag its container: a stop that cancels a launch records
// Stopped at once and stops the container only once it holds the operation lock, which a capture queued behind the
// launch may take first, so the tenant's code would keep running (and could rearrange the workspace) during the
// copy. A running record is frozen without asking (the usual case, no extra engine call: Pause is idempotent);
// every other phase asks the engine. A container that is gone or stopped cannot change anything while the
// operation lock is held (only a launch, which takes that lock, starts it), and one already frozen stays frozen
// (only a resume, which takes it too, thaws it) and is not thawed after the copy either.
func (m *Manager) mustFreeze(ctx context.Context, e *entry, phase Phase, cid string) (bool, error) {
	if phase == PhaseRunning {
		return true, nil
	}
	st, err := m.driver.Inspect(ctx, cid)
	switch {
	case errors.Is(err, ErrContainerNotFound):
		return false, nil
	case err != nil:
		return false, &Error{Code: CodeEngine, Message: fmt.Sprintf("finding out whether sandbox %s runs before copying its workspace", e.rec.ID), Err: err}
	}
	return st.Running && !st.Paused, nil
}

// alongside runs release and step at once and returns step's error once both are done.
func alongside(release func(), step func() error) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		release()
	}()
	err := step()
	<-done
	return err
}

// Snapshots lists snapshots, newest first; owner "" lists every owner's.
func (m *Manager) Snapshots(ctx context.Context, owner string) ([]Snapshot, error) {
	_, ss, err := m.snapshotBackends()
	if err != nil {
		return nil, err
	}
	all, err := ss.LoadSnapshots()
	if err != nil {
		return nil, fmt.Errorf("reading snapshots: %w", err)
	}
	out := all[:0]
	for _, s := range all {
		if owner == "" || s.Owner == owner {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return newerThan(out[i].CreatedAt, out[i].ID, out[j].CreatedAt, out[j].ID) })
	return out, nil
}

// GetSnapshot returns one snapshot (any owner's: callers scope it).
func (m *Manager) GetSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	if !snapshotIDPattern.MatchString(id) {
		return nil, snapshotNotFound(id)
	}
	all, err := m.Snapshots(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, s := range all {
		if s.ID == id {
			return &s, nil
		}
	}
	return nil, snapshotNotFound(id)
}

// DeleteSnapshot removes a snapshot and its stored copy, freeing its bytes of its owner's quota.
func (m *Manager) DeleteSnapshot(ctx context.Context, id string) error {
	s, err := m.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	_, ss, err := m.snapshotBackends()
	if err != nil {
		return err
	}
	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	if err := m.driver.RemoveVolume(ctx, s.Volume); err != nil {
		return &Error{Code: CodeEngine, Message: fmt.Sprintf("removing the stored copy of snapshot %s", id), Err: err}
	}
	if err := ss.DeleteSnapshot(id); err != nil {
		return fmt.Errorf("deleting snapshot %s from the store: %w", id, err)
	}
	return nil
}

// CreateFromSnapshot creates a sandbox whose workspace starts as a copy of snapshot snapshotID. The caller has
// checked that req.Owner may use the snapshot. An empty req.Profile takes the snapshot's.
func (m *Manager) CreateFromSnapshot(ctx context.Context, req CreateRequest, snapshotID string) (*Sandbox, CopyStats, error) {
	if req.WorkspaceID != "" {
		return nil, CopyStats{}, Errorf(CodeInvalid, "a sandbox starts from a snapshot or from a workspace, not both")
	}
	s, err := m.GetSnapshot(ctx, snapshotID)
	if err != nil {
		return nil, CopyStats{}, err
	}
	vc, _, err := m.snapshotBackends()
	if err != nil {
		return nil, CopyStats{}, err
	}
	if req.Profile == "" {
		req.Profile = s.Profile
	}
	if _, ok := m.Profile(req.Profile); !ok {
		return nil, CopyStats{}, &Error{Code: CodeUnknownProfile, Message: fmt.Sprintf("unknown profile %q", req.Profile)}
	}
	ws, _, done := m.takeCopyTarget() // spare_volume.go: the copier finds a spare made
	defer done()
	// Held for the copy: a delete of the snapshot waits for it instead of pulling the files from under it.
	m.snapMu.Lock()
	stats, err := vc.CopyVolume(ctx, s.Volume, m.VolumeName(ws), m.volumeLabels(Record{WorkspaceID: ws, ManagedWorkspace: true}), 0)
	m.snapMu.Unlock()
	if err != nil {
		return nil, stats, copyFailed(fmt.Sprintf("copying snapshot %s", snapshotID), err)
	}
	sb, err := m.createOnCopy(ctx, req, ws)
	return sb, stats, err
}

// Fork creates a sandbox of the same profile, owner and env whose workspace is a copy of sandbox id's, made
// with one copy (a fork keeps no snapshot). The source is frozen for the copy if it runs.
func (m *Manager) Fork(ctx context.Context, id string, fr ForkRequest) (*ForkResult, error) {
	vc, ok := m.driver.(VolumeCopier)
	if !ok {
		return nil, &Error{Code: CodeCapabilityAbsent, Message: "this container engine cannot copy workspaces", Details: map[string]any{"capability": "fork"}}
	}
	e, err := m.liveEntry(id)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	req := CreateRequest{Profile: e.rec.Profile, Owner: e.rec.Owner, TTL: fr.TTL, Env: e.rec.Env, RecordWorkspace: fr.RecordWorkspace,
		Metadata: fr.Metadata, UnguessableID: fr.UnguessableID,
		// The fork keeps the source's own outbound policy: a copy must not reach more than its source.
		Egress: cloneEgress(e.rec.Egress)}
	if fr.TTL > 0 || (fr.TTL == 0 && m.cfg.DefaultTTL > 0) {
		req.OnExpire = e.rec.OnExpire // and what its timeout does (expiry.go), where the fork has a timeout
	}
	src := m.VolumeName(e.rec.WorkspaceID)
	m.mu.RUnlock()
	if _, ok := m.Profile(req.Profile); !ok {
		return nil, &Error{Code: CodeUnknownProfile, Message: fmt.Sprintf("profile %q of sandbox %s is no longer configured", req.Profile, id)}
	}
	ws, premade, done := m.takeCopyTarget() // spare_volume.go
	defer done()
	stats, release, err := m.captureWorkspace(ctx, e, vc, src, m.VolumeName(ws), m.volumeLabels(Record{WorkspaceID: ws, ManagedWorkspace: true}), 0, premade)
	if err != nil {
		return nil, err
	}
	var sb *Sandbox
	err = alongside(release, func() (err error) {
		sb, err = m.createOnCopy(ctx, req, ws)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &ForkResult{Sandbox: sb, Copy: stats}, nil
}

// createOnCopy creates a sandbox on the freshly copied workspace ws, which is its own from the first record
// (deleted with it; one store write). A create that fails removes the copy.
func (m *Manager) createOnCopy(ctx context.Context, req CreateRequest, ws string) (*Sandbox, error) {
	req.WorkspaceID = ws
	req.ownWorkspace = true
	sb, err := m.Create(ctx, req)
	if err != nil {
		_ = m.driver.RemoveVolume(context.WithoutCancel(ctx), m.VolumeName(ws))
		return nil, err
	}
	return sb, nil
}

// sweepSnapshotOrphans removes snapshot volumes of this namespace and instance that no snapshot record names (a
// gateway that died between a copy and its record leaves one) once orphanAged allows (gc.go: at the first sweep
// after a restart, for one the earlier process left).
// It holds snapMu, so no capture whose record is still to be written is in flight.
func (m *Manager) sweepSnapshotOrphans(ctx context.Context, rep *GCReport) {
	ss, ok := m.store.(SnapshotStore)
	if !ok {
		return
	}
	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	vols, err := m.driver.ListVolumes(ctx, map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label("snapshot"): ""})
	if err != nil || len(vols) == 0 {
		return
	}
	all, err := ss.LoadSnapshots()
	if err != nil {
		rep.fail(GCOrphanVolumes, "reading snapshots for the orphan sweep", err)
		m.log.Warn("reading snapshots for the orphan sweep", "error", err)
		return
	}
	known := make(map[string]bool, len(all))
	for _, s := range all {
		known[s.Volume] = true
	}
	m.mu.RLock()
	minAge, inherited := m.cfg.OrphanMinAge, m.inherited
	m.mu.RUnlock()
	now := time.Now()
	for _, v := range vols {
		if known[v.Name] || !orphanAged(v.Name, v.Created, now, minAge, inherited) {
			continue
		}
		if err := m.driver.RemoveVolume(ctx, v.Name); err != nil {
			rep.fail(GCOrphanVolumes, "removing orphan snapshot volume", err)
			m.log.Warn("removing orphan snapshot volume", "volume", v.Name, "error", err)
			continue
		}
		rep.OrphanVolumes++
		m.emit(Event{Type: EventGC, Reason: "orphan_snapshot"})
	}
}
