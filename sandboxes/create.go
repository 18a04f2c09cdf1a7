package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"
)

// Launch types.
const (
	LaunchWarm = "warm"
	LaunchCold = "cold"
)

// Create makes a sandbox and returns at once: a warm claim is ready, a cold create is starting and becomes ready
// by itself in the background.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Sandbox, error) {
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, Errorf(CodeInvalid, "invalid env name %q", k)
		}
	}
	if err := ValidateMetadata(req.Metadata); err != nil {
		return nil, err
	}
	if req.WorkspaceID != "" && !workspacePattern.MatchString(req.WorkspaceID) {
		return nil, Errorf(CodeInvalid, "workspace_id %q is not a workspace id (ws-<hex>)", req.WorkspaceID)
	}
	if err := m.checkImage(ctx, req); err != nil {
		return nil, err
	}
	if err := m.checkOnExpire(req.OnExpire); err != nil { // expiry.go
		return nil, err
	}
	if w, ok := m.store.(StoreWritable); ok {
		// A full data disk refuses the create before it makes anything (store_full.go).
		if err := w.Writable(); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	m.mu.Lock()
	if !m.started || m.closed {
		m.mu.Unlock()
		return nil, Errorf(CodeEngine, "the sandbox manager is not running")
	}
	p, ok := m.profiles[req.Profile]
	base := p
	if !ok {
		known := m.profileIDsLocked()
		m.mu.Unlock()
		return nil, &Error{Code: CodeUnknownProfile, Message: fmt.Sprintf("unknown profile %q", req.Profile),
			Details: map[string]any{"profiles": known}}
	}
	if req.Image != nil {
		derived, err := p.WithImage(*req.Image) // profile_image.go
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		p = derived
	}
	if req.Resources != (Resources{}) {
		derived, err := p.WithResources(req.Resources) // profile_image.go
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		p = derived
	}
	if req.Egress != nil && !p.EgressEnforced() {
		m.mu.Unlock()
		return nil, Errorf(CodeInvalid, "profile %q does not send its sandboxes' traffic through the egress proxy alone (network internal with egress.proxy): a sandbox egress policy cannot be enforced", p.ID)
	}
	now := m.clock()
	m.noteDemandLocked(p.ID) // warm.go
	var ipool *imagePool
	if req.Image != nil && req.WorkspaceID == "" && !req.skipPool {
		ipool = m.noteImageDemandLocked(base, *req.Image, req.Resources, p, now) // warm_image.go
		if ipool != nil && req.UnguessableID {
			ipool.ps.unguessable = true
		}
	}
	if ps := m.poolLocked(p.ID); req.UnguessableID && !ps.unguessable {
		// The first such create of this profile: its pool refills with unguessable ids from now on, and the members
		// it holds with ordinary ids are replaced (they could serve only ordinary creates).
		ps.unguessable = true
		for _, o := range m.entries {
			if o.rec.Warm && !o.deleted && o.rec.Profile == p.ID && !strings.HasPrefix(o.rec.ID, UnguessableIDPrefix) {
				m.detachLocked(o)
				go m.destroyDetached(o, "warm member with an ordinary id")
			}
		}
		kick(m.warmKick)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = m.cfg.DefaultTTL
	}
	var expires *time.Time
	if ttl > 0 {
		t := now.Add(ttl)
		expires = &t
	} else if req.OnExpire != "" {
		m.mu.Unlock()
		return nil, Errorf(CodeInvalid, "on_expire %s needs a TTL: this sandbox would never expire", req.OnExpire)
	}
	if m.cfg.MaxPerOwner > 0 {
		if n := m.ownerCountLocked(req.Owner, now); n >= m.cfg.MaxPerOwner {
			m.mu.Unlock()
			return nil, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf("owner has %d sandboxes, the limit is %d", n, m.cfg.MaxPerOwner),
				Details: map[string]any{"limit": m.cfg.MaxPerOwner, "scope": "owner"}}
		}
	}
	if len(req.Env) == 0 && req.WorkspaceID == "" && req.Image == nil && p.Resources == m.profiles[req.Profile].Resources {
		// Pool first: a ready member, else the one that has been starting longest (warm.go).
		launch := LaunchWarm
		e := m.claimLocked(p, now, req.UnguessableID)
		if e == nil {
			if e = m.claimStartingLocked(p, req.UnguessableID); e != nil {
				launch = LaunchPrestarted
			}
		}
		if e != nil {
			e.rec.Warm = false
			e.rec.Owner = req.Owner
			e.rec.LaunchType = launch
			e.rec.CreatedAt = now
			e.rec.ExpiresAt = expires
			setOnExpire(e, req.OnExpire, ttl)
			if req.OnExpire != "" {
				kick(m.expiryKick)
			}
			e.rec.Metadata = maps.Clone(req.Metadata)
			e.rec.Egress = cloneEgress(req.Egress)
			setIdleDeadline(e, now)
			if launch == LaunchWarm {
				m.holdRefillLocked(e, now) // warm_hold.go
			}
			m.noteCreateLocked(p.ID, launch)
			sb := m.snapshotLocked(e, now)
			m.mu.Unlock()
			if err := m.persist(e); err != nil {
				return nil, m.abandonCreate(ctx, sb.ID, err)
			}
			m.recordManagedWorkspace(req, sb, now) // workspaces.go; a warm member's workspace is its own
			kick(m.warmKick)
			m.emit(Event{Type: EventCreated, SandboxID: sb.ID, Profile: sb.Profile, Owner: sb.Owner, LaunchType: launch, Duration: time.Since(began)})
			return sb, nil
		}
	}
	if e := m.claimImageLocked(ipool, p, now, req.UnguessableID); e != nil { // warm_image.go
		return m.finishImageClaim(ctx, req, e, expires, now, began)
	}
	if req.WorkspaceID != "" {
		if err := m.workspaceMountableLocked(req); err != nil { // workspaces.go
			m.mu.Unlock()
			return nil, err
		}
		for _, o := range m.entries {
			if o.rec.WorkspaceID == req.WorkspaceID && !o.deleted {
				m.mu.Unlock()
				return nil, Errorf(CodeInvalid, "workspace %s is in use by sandbox %s", req.WorkspaceID, o.rec.ID)
			}
		}
	}
	var after <-chan struct{}
	if m.cfg.MaxSandboxes > 0 && m.heldLocked() >= m.cfg.MaxSandboxes {
		// Warm members count toward the cap, but a real request beats a prefetched one. The new container is made
		// only once the one it replaces is gone, so the engine never holds more than the cap.
		if victim := m.warmVictimLocked(); victim != nil {
			m.detachLocked(victim)
			go m.destroyDetached(victim, "evicted for a create")
		}
		if len(m.freeing) == 0 {
			m.mu.Unlock()
			return nil, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf("the gateway runs %d sandboxes, the limit is %d", m.cfg.MaxSandboxes, m.cfg.MaxSandboxes),
				Details: map[string]any{"limit": m.cfg.MaxSandboxes, "scope": "global"}}
		}
		after = m.freeing[len(m.freeing)-1].done
		m.freeing = m.freeing[:len(m.freeing)-1]
	}
	m.noteCreateLocked(p.ID, LaunchCold)
	e := m.newEntryLockedAfter(p, req.Owner, req.Env, req.WorkspaceID, expires, false, now, after, req.UnguessableID)
	setOnExpire(e, req.OnExpire, ttl)
	if req.OnExpire != "" {
		kick(m.expiryKick)
	}
	e.rec.LaunchType = LaunchCold
	e.rec.Metadata = maps.Clone(req.Metadata)
	e.rec.Egress = cloneEgress(req.Egress)
	sb := m.snapshotLocked(e, now)
	e.rec.ManagedWorkspace = e.rec.ManagedWorkspace || req.ownWorkspace // a fork's or snapshot's copy: its own
	managed := e.rec.ManagedWorkspace
	m.mu.Unlock()
	if err := m.persist(e); err != nil {
		return nil, m.abandonCreate(ctx, sb.ID, err)
	}
	if managed {
		m.recordManagedWorkspace(req, sb, now) // workspaces.go
	}
	kick(m.warmKick)
	m.emit(Event{Type: EventCreated, SandboxID: sb.ID, Profile: sb.Profile, Owner: sb.Owner, LaunchType: LaunchCold})
	return sb, nil
}

// abandonCreate undoes a create whose record could not be written: the data disk can fill between Writable's check
// and the write. A sandbox the store does not hold is lost at the next start, its container and volume left to the
// orphan sweep, so the create fails with the store's error (storage_full, typed, for a full disk) and removes what
// its launch made: the launch is cancelled, and the remove waits for it to end (its engine steps run to completion
// and are recorded), then removes its container and, when the create made it, its workspace volume.
func (m *Manager) abandonCreate(ctx context.Context, id string, err error) error {
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if rerr := m.remove(rmCtx, id, "record not written"); rerr != nil {
		// Its record was never written, so the store's own delete may fail on the same full disk: the engine
		// objects are gone by then (destroy removes them first); anything left is the orphan sweep's.
		m.log.Warn("removing a sandbox whose record could not be written", "sandbox", id, "error", rerr)
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("recording the new sandbox %s: %w", id, err)
}

// checkImage refuses, before anything is recorded, a caller-chosen image the engine does not hold: sandgate never
// pulls. The allow-list is checked first, so a refused image tells the caller nothing about what the engine holds.
func (m *Manager) checkImage(ctx context.Context, req CreateRequest) error {
	if req.Image == nil {
		return nil
	}
	ic, ok := m.driver.(ImageChecker)
	if !ok {
		return nil
	}
	m.mu.RLock()
	p, known := m.profiles[req.Profile]
	m.mu.RUnlock()
	if !known {
		return nil // Create answers unknown_profile
	}
	derived, err := p.WithImage(*req.Image)
	if err != nil {
		return err
	}
	return ic.ImagePresent(ctx, derived.Image)
}

var workspacePattern = regexp.MustCompile(`^ws-[0-9a-f]{12}$`)

// newEntryLockedAfter records a new sandbox (before any engine call) and starts its launch in the background; the
// launch makes no engine call before after is closed (the sandbox whose place it takes under max_sandboxes is
// gone; nil: at once). unguessable gives it an id of UnguessableIDPrefix and 128 random bits.
func (m *Manager) newEntryLockedAfter(p Profile, owner string, env map[string]string, workspace string, expires *time.Time, warm bool, now time.Time, after <-chan struct{}, unguessable bool) *entry {
	newID := func() string { return "sandbox-" + randomHex(6) }
	if unguessable {
		newID = func() string { return UnguessableIDPrefix + randomHex(16) }
	}
	id := newID()
	for m.entries[id] != nil {
		id = newID()
	}
	managed := workspace == ""
	if managed {
		workspace = "ws-" + randomHex(6)
	}
	spec := p
	e := &entry{profile: p, rec: Record{
		ID: id, Profile: p.ID, ProfileHash: p.Hash(), Owner: owner, WorkspaceID: workspace, ManagedWorkspace: managed,
		Token: randomHex(24), Env: env, CreatedAt: now, ExpiresAt: expires, Phase: PhaseCreating, Generation: 1, Warm: warm,
		Spec: &spec,
	}}
	if warm {
		e.rec.LaunchType = LaunchWarm
		if st := m.shared(); st != nil {
			e.rec.Gateway = st.Identity()
		}
	}
	e.after = after
	e.refill = warm
	m.entries[id] = e
	m.beginLaunchLocked(e)
	return e
}

// finishImageClaim hands a member of a warm pool by image to its create (warm_image.go): the record becomes the
// create's, then its waiting agent gets the create's environment and starts as a cold one would. A claim that fails
// removes the member and the create goes on cold. Called with m.mu held; it unlocks it.
func (m *Manager) finishImageClaim(ctx context.Context, req CreateRequest, e *entry, expires *time.Time, now, began time.Time) (*Sandbox, error) {
	e.rec.Warm = false
	e.rec.Owner = req.Owner
	e.rec.Env = cloneEnv(req.Env)
	e.rec.LaunchType = LaunchWarm
	e.rec.CreatedAt = now
	e.rec.ExpiresAt = expires
	e.rec.Metadata = maps.Clone(req.Metadata)
	e.rec.Egress = cloneEgress(req.Egress)
	setIdleDeadline(e, now)
	rec, p, timeout := e.rec, e.profile, m.cfg.StartTimeout
	m.mu.Unlock()
	kick(m.warmKick)
	if err := m.persist(e); err != nil {
		return nil, m.abandonCreate(ctx, rec.ID, err)
	}
	e.opMu.Lock()
	err := m.deliverClaim(ctx, rec, p, rec.Addr, timeout)
	e.opMu.Unlock()
	m.mu.Lock()
	m.noteImageClaimLocked(rec.ProfileHash, err == nil)
	m.mu.Unlock()
	if err != nil {
		m.log.Warn("claiming a warm sandbox by image failed; creating cold", "sandbox", rec.ID, "error", err)
		if rerr := m.remove(context.WithoutCancel(ctx), rec.ID, "warm claim failed"); rerr != nil {
			m.log.Warn("removing a warm sandbox whose claim failed", "sandbox", rec.ID, "error", rerr)
		}
		req.skipPool = true
		return m.Create(ctx, req)
	}
	m.mu.Lock()
	sb := m.snapshotLocked(e, m.clock())
	m.mu.Unlock()
	m.recordManagedWorkspace(req, sb, now) // workspaces.go; a warm member's workspace is its own
	m.emit(Event{Type: EventCreated, SandboxID: sb.ID, Profile: sb.Profile, Owner: sb.Owner, LaunchType: LaunchWarm, Duration: time.Since(began)})
	return sb, nil
}
