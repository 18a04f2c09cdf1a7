package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Pause and resume: the cgroup freezer (docker pause). A paused sandbox keeps its processes, memory, open PTYs
// and services; it uses no CPU, and its TTL keeps running. Any request that needs its agent (EnsureRunning)
// resumes it inside the request, the way an idle-stopped sandbox is started.

// PhasePaused is a sandbox whose processes are frozen (cgroup freezer); container, memory and workspace kept.
const PhasePaused Phase = "paused"

// StatusPaused is the API status of a paused sandbox (a sandgate addition to Bay's set).
const StatusPaused Status = "paused"

// CodeInvalidState answers an operation the sandbox's current state does not allow (pausing a stopped sandbox).
const CodeInvalidState = "invalid_state"

// Idle actions of a profile: what its idle timeout does.
const (
	IdleActionStop  = "stop"  // stop the container: memory freed, processes lost, workspace kept (the default)
	IdleActionPause = "pause" // freeze it: memory and processes kept; resumes much faster than a cold start
)

// DefaultPauseTimeout is how long a sandbox paused for idleness stays paused before it is stopped, when the profile
// names no pause_timeout.
const DefaultPauseTimeout = time.Hour

// Lifecycle events of pause and resume.
const (
	EventPaused  = "paused"  // its processes were frozen (asked, or idle with idle_action pause)
	EventResumed = "resumed" // they were thawed (asked, or a request arrived)
)

// PauseDriver is what a Driver offers when its engine can freeze a container (Docker's cgroup freezer). The
// Manager asks for it with a type assertion, so engines without it keep working and answer pause with
// capability_not_supported.
type PauseDriver interface {
	// Pause freezes every process of the container.
	Pause(ctx context.Context, containerID string) error
	// Unpause thaws them. Thawing a container that is not paused is not an error.
	Unpause(ctx context.Context, containerID string) error
}

// validateLifecycle checks the profile's idle action settings.
func (p *Profile) validateLifecycle() error {
	switch p.IdleAction {
	case "", IdleActionStop, IdleActionPause:
	default:
		return fmt.Errorf("profile %q: idle_action must be %s or %s", p.ID, IdleActionStop, IdleActionPause)
	}
	if p.PauseTimeout < 0 {
		return fmt.Errorf("profile %q: pause_timeout must not be negative", p.ID)
	}
	if p.PauseTimeout != 0 && p.IdleAction != IdleActionPause {
		return fmt.Errorf("profile %q: pause_timeout applies only with idle_action pause", p.ID)
	}
	return nil
}

// pauseTimeout is the second deadline: how long an idle-paused sandbox stays paused before it is stopped.
func (p *Profile) pauseTimeout() time.Duration {
	if d := p.PauseTimeout.Std(); d > 0 {
		return d
	}
	return DefaultPauseTimeout
}

func (m *Manager) pauser() (PauseDriver, error) {
	pd, ok := m.driver.(PauseDriver)
	if !ok {
		return nil, &Error{Code: CodeCapabilityAbsent, Message: "this container engine cannot pause sandboxes",
			Details: map[string]any{"capability": "pause"}}
	}
	return pd, nil
}

// Pause freezes a sandbox's processes. Pausing a paused sandbox does nothing; a sandbox that is not running
// (idle, starting, failed) answers invalid_state.
func (m *Manager) Pause(ctx context.Context, id string) (*Sandbox, error) {
	e, err := m.liveEntry(id)
	if err != nil {
		return nil, err
	}
	if err := m.pause(ctx, e, "requested", false); err != nil {
		return nil, err
	}
	return m.Get(ctx, id)
}

// Resume thaws a paused sandbox. Resuming a running sandbox does nothing; an idle (stopped) one is started, as
// any request would.
func (m *Manager) Resume(ctx context.Context, id string) (*Sandbox, error) {
	if _, err := m.EnsureRunning(ctx, id); err != nil {
		return nil, err
	}
	return m.Get(ctx, id)
}

// liveEntry finds a sandbox callers may act on.
func (m *Manager) liveEntry(id string) (*entry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.liveLocked(id, m.clock())
}

// pause freezes e. idle is set when the collector pauses an idle sandbox: it gets the profile's second deadline,
// after which the collector stops it. An asked pause has no deadline but the TTL.
func (m *Manager) pause(ctx context.Context, e *entry, reason string, idle bool) error {
	pd, err := m.pauser()
	if err != nil {
		return err
	}
	e.opMu.Lock()
	defer e.opMu.Unlock()
	m.mu.Lock()
	switch {
	case e.deleted:
		m.mu.Unlock()
		return notFound(e.rec.ID)
	case idle && !m.stillIdle(e):
		// A lease or activity arrived since the collector's scan: checked in the same critical section that
		// commits the pause, so a request never holds a sandbox that is being frozen (see stopIf).
		m.mu.Unlock()
		return errNoLongerIdle
	case e.rec.Phase == PhasePaused:
		m.mu.Unlock()
		return nil
	case e.rec.Phase != PhaseRunning || e.rec.ContainerID == "" || e.rec.Died != nil:
		st := statusOf(e, m.clock())
		m.mu.Unlock()
		return &Error{Code: CodeInvalidState, Message: fmt.Sprintf("sandbox %s is %s; only a ready sandbox can be paused", e.rec.ID, st),
			Details: map[string]any{"status": st}}
	}
	cid := e.rec.ContainerID
	// The phase is recorded before the engine call: a gateway that dies between the two finds a paused record on
	// a running container, which it adopts as running; the reverse (a frozen container recorded as running) would
	// be restarted on a paused container.
	e.rec.Phase = PhasePaused
	e.rec.IdleExpiresAt = nil
	if idle {
		t := m.clock().Add(e.profile.pauseTimeout())
		e.rec.IdleExpiresAt = &t
	}
	m.mu.Unlock()
	m.persist(e)
	if err := pd.Pause(ctx, cid); err != nil {
		m.mu.Lock()
		if e.rec.Phase == PhasePaused {
			e.rec.Phase = PhaseRunning
			setIdleDeadline(e, m.clock())
		}
		m.mu.Unlock()
		m.persist(e)
		return &Error{Code: CodeEngine, Message: fmt.Sprintf("pausing sandbox %s", e.rec.ID), Err: err}
	}
	m.emit(Event{Type: EventPaused, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Reason: reason})
	return nil
}

// resume thaws e (EnsureRunning calls it for a paused sandbox). A container that is no longer paused because it
// stopped while paused (killed, engine restarted) is recorded as stopped, and the caller's next round starts it.
func (m *Manager) resume(ctx context.Context, e *entry, reason string) error {
	pd, err := m.pauser()
	if err != nil {
		return err
	}
	began := time.Now()
	e.opMu.Lock()
	defer e.opMu.Unlock()
	m.mu.Lock()
	if e.deleted || e.rec.Phase != PhasePaused {
		m.mu.Unlock()
		return nil // someone else resumed, stopped or deleted it; the caller looks again
	}
	cid := e.rec.ContainerID
	m.mu.Unlock()
	if err := pd.Unpause(ctx, cid); err != nil {
		st, ierr := m.driver.Inspect(ctx, cid)
		switch {
		case ierr == nil && st.Running && !st.Paused:
			// Already thawed by someone else: carry on as resumed.
		case ierr == nil && !st.Running:
			m.mu.Lock()
			e.rec.Phase = PhaseStopped
			e.rec.IdleExpiresAt = nil
			m.setAddrLocked(e, "")
			m.mu.Unlock()
			m.persist(e)
			return nil
		default:
			return &Error{Code: CodeEngine, Message: fmt.Sprintf("resuming sandbox %s", e.rec.ID), Err: err}
		}
	}
	m.mu.Lock()
	e.rec.Phase = PhaseRunning
	setIdleDeadline(e, m.clock())
	m.wakeLocked(e, m.clock()) // paused by its TTL: it lives its TTL again (expiry.go)
	m.mu.Unlock()
	// Written off the request's path: a gateway that dies first finds a paused record on a running container,
	// which reconcile adopts as running.
	go m.persist(e)
	m.emit(Event{Type: EventResumed, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Reason: reason,
		Duration: time.Since(began)})
	return nil
}

// idleDue reports whether the collector has idle work on e: a running sandbox past its idle deadline (stop or
// pause it), or an idle-paused one past its second deadline (stop it). The caller holds m.mu.
func idleDue(e *entry, now time.Time) bool {
	return (e.rec.Phase == PhaseRunning || e.rec.Phase == PhasePaused) && e.rec.IdleExpiresAt != nil && now.After(*e.rec.IdleExpiresAt)
}

// collectIdle does the collector's idle work on e, re-checked under the lock (activity or a lease may have
// arrived since the scan). It reports what it did: "" (nothing), "idle_stopped", "idle_paused" or
// "pause_expired".
func (m *Manager) collectIdle(ctx context.Context, e *entry) (string, error) {
	m.mu.RLock()
	still := m.stillIdle(e)
	phase, action := e.rec.Phase, e.profile.IdleAction
	m.mu.RUnlock()
	if !still {
		return "", nil
	}
	var did string
	var err error
	switch {
	case phase == PhaseRunning && action == IdleActionPause:
		if _, ok := m.driver.(PauseDriver); ok {
			did, err = "idle_paused", m.pause(ctx, e, "idle", true)
			break
		}
		did, err = "idle_stopped", m.stopIf(ctx, e, "idle", m.stillIdle)
	case phase == PhasePaused:
		did, err = "pause_expired", m.stopIf(ctx, e, "paused too long", m.stillIdle)
	default:
		did, err = "idle_stopped", m.stopIf(ctx, e, "idle", m.stillIdle)
	}
	if errors.Is(err, errNoLongerIdle) {
		return "", nil
	}
	return did, err
}

// stillIdle reports whether the collector may act on e: no lease, not deleted, past its idle deadline on the
// Manager's clock. The caller holds m.mu.
func (m *Manager) stillIdle(e *entry) bool {
	return e.leases == 0 && !e.deleted && idleDue(e, m.clock())
}
