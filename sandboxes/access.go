package sandboxes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// EnsureRunning returns the sandbox's agent target, starting an idle-stopped sandbox and waiting (bounded by
// the start timeout and ctx) for its readiness. It counts as activity.
func (m *Manager) EnsureRunning(ctx context.Context, id string) (Target, error) {
	triggered := false
	for {
		now := m.clock()
		m.mu.Lock()
		e, err := m.liveLocked(id, now)
		if err != nil {
			m.mu.Unlock()
			return Target{}, err
		}
		if m.closed || !m.started {
			m.mu.Unlock()
			return Target{}, Errorf(CodeEngine, "the sandbox manager is not running")
		}
		if err, ok := m.recoverLocked(e); ok { // a dead container: recovery.go
			m.mu.Unlock()
			return Target{}, err
		}
		switch e.rec.Phase {
		case PhaseRunning:
			if stopping := e.stopping; stopping != nil {
				// The idle collector committed to stopping it before this request's lease: wait for the stop to
				// end, then start it again on the next round.
				m.mu.Unlock()
				select {
				case <-stopping:
				case <-ctx.Done():
					return Target{}, &Error{Code: CodeTimeout, Message: fmt.Sprintf("sandbox %s was still stopping when the request ended", id), Err: ctx.Err()}
				}
				continue
			}
			m.touchLocked(e, now)
			t := m.targetLocked(e)
			m.mu.Unlock()
			return t, nil
		case PhaseStopped, PhaseFailed:
			if triggered {
				msg, typed := e.rec.LastError, e.launchErr
				m.mu.Unlock()
				return Target{}, launchFailure(id, msg, typed)
			}
			if !e.launching {
				if e.rec.Phase == PhaseStopped {
					m.emitLocked(Event{Type: EventStarted, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner})
				}
				e.rec.Phase = PhaseStarting
				e.rec.LastError = ""
				e.launchErr = nil
				m.beginLaunchLocked(e)
			}
			triggered = true
		case PhasePaused:
			// Thawed inside the request (pause.go); the next round returns the target.
			m.mu.Unlock()
			if err := m.resume(ctx, e, "request"); err != nil {
				return Target{}, err
			}
			continue
		case PhaseCreating, PhaseStarting:
			if !e.launching && e.remoteBusy {
				// Another gateway of the fleet is bringing it up (shared.go): wait for its next word. If none comes
				// within the start timeout, that gateway is taken for gone and this one starts the sandbox.
				wake, timeout := e.remoteWake, m.cfg.StartTimeout
				m.mu.Unlock()
				timer := time.NewTimer(timeout)
				select {
				case <-wake:
				case <-timer.C:
					m.mu.Lock()
					if e.remoteWake == wake {
						e.remoteBusy = false
					}
					m.mu.Unlock()
				case <-ctx.Done():
					timer.Stop()
					return Target{}, &Error{Code: CodeTimeout, Message: fmt.Sprintf("sandbox %s was not ready before the request ended", id), Err: ctx.Err()}
				}
				timer.Stop()
				continue
			}
			if !e.launching {
				// A launch that ended without an outcome (the previous Manager closed mid-start): start again.
				if triggered {
					m.mu.Unlock()
					return Target{}, &Error{Code: CodeEngine, Message: fmt.Sprintf("sandbox %s could not be started", id)}
				}
				m.beginLaunchLocked(e)
				triggered = true
			}
		}
		ch := e.ready
		timeout := m.cfg.StartTimeout
		m.mu.Unlock()
		if ch == nil {
			continue
		}
		timer := time.NewTimer(timeout)
		select {
		case <-ch:
			timer.Stop()
		case <-timer.C:
			return Target{}, &Error{Code: CodeTimeout, Message: fmt.Sprintf("sandbox %s was not ready within %s", id, timeout),
				Details: map[string]any{"timeout_seconds": timeout.Seconds()}}
		case <-ctx.Done():
			timer.Stop()
			return Target{}, &Error{Code: CodeTimeout, Message: fmt.Sprintf("sandbox %s was not ready before the request ended", id), Err: ctx.Err()}
		}
	}
}

// Resolve returns the agent target of a ready sandbox from memory, without I/O.
func (m *Manager) Resolve(id string) (Target, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e := m.entries[id]
	if e == nil || !m.resolvableLocked(e, m.clock()) {
		return Target{}, false
	}
	return m.targetLocked(e), true
}

// Exists reports from memory whether id names a live (not expired, not deleted) sandbox.
func (m *Manager) Exists(id string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, err := m.liveLocked(id, m.clock())
	return err == nil
}

// Keepalive extends the idle deadline of a running sandbox. It never starts compute.
func (m *Manager) Keepalive(ctx context.Context, id string) error {
	now := m.clock()
	m.mu.Lock()
	e, err := m.liveLocked(id, now)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.touchLocked(e, now)
	m.mu.Unlock()
	m.persist(e)
	return nil
}

// ExtendTTL moves the expiry to max(expires_at, now) + by.
func (m *Manager) ExtendTTL(ctx context.Context, id string, by time.Duration) (*Sandbox, error) {
	if by <= 0 {
		return nil, Errorf(CodeInvalid, "extend_by must be positive")
	}
	now := m.clock()
	m.mu.Lock()
	e, err := m.visibleLocked(id)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	if e.rec.ExpiresAt == nil {
		m.mu.Unlock()
		return nil, Errorf(CodeTTLInfinite, "sandbox %s never expires", id)
	}
	if expired(e, now) {
		m.mu.Unlock()
		return nil, expiredError(id)
	}
	base := *e.rec.ExpiresAt
	if now.After(base) {
		base = now
	}
	t := base.Add(by)
	e.rec.ExpiresAt = &t
	sb := m.snapshotLocked(e, now)
	m.mu.Unlock()
	m.persist(e)
	return sb, nil
}

// SetTTL makes a sandbox expire ttl from now, earlier or later than before (E2B's setTimeout: "the TTL counts
// from now and may shorten"). A sandbox without a TTL gets one.
func (m *Manager) SetTTL(ctx context.Context, id string, ttl time.Duration) (*Sandbox, error) {
	if ttl <= 0 {
		return nil, Errorf(CodeInvalid, "the timeout must be positive")
	}
	now := m.clock()
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		m.mu.Unlock()
		return nil, notFound(id)
	}
	if expired(e, now) {
		m.mu.Unlock()
		return nil, expiredError(id)
	}
	t := now.Add(ttl)
	e.rec.ExpiresAt = &t
	if e.rec.OnExpire != "" && e.rec.ExpiredAt == nil {
		e.rec.ResumeTTL = ttl // a resume after the TTL kept it gives this TTL again (expiry.go)
	}
	sb := m.snapshotLocked(e, now)
	m.mu.Unlock()
	m.persist(e)
	kick(m.expiryKick)
	return sb, nil
}

// Acquire holds a lease on a sandbox: while any lease is held it counts as active and the collector never stops
// or removes it. Call release exactly once (more calls do nothing).
func (m *Manager) Acquire(id string) (func(), error) {
	now := m.clock()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.liveLocked(id, now)
	if err != nil {
		return nil, err
	}
	e.leases++
	m.touchLocked(e, now)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			e.leases--
			m.touchLocked(e, m.clock())
			m.mu.Unlock()
		})
	}, nil
}

// Hold starts a sandbox if it is idle and holds a lease on it until ctx ends: the request that uses the target
// can never lose its container to the idle collector. The lease is taken first, so a collector that has not yet
// committed to a stop sees it, and one that has is waited for (EnsureRunning).
func (m *Manager) Hold(ctx context.Context, id string) (Target, error) {
	release, err := m.Acquire(id)
	if err != nil {
		return Target{}, err
	}
	t, err := m.EnsureRunning(ctx, id)
	if err != nil {
		release()
		return Target{}, err
	}
	context.AfterFunc(ctx, release)
	return t, nil
}

// launchFailure is what a request that started sandbox id gets when the launch failed: the launch's own code where it
// carried one a caller acts on (its details too), else engine_error. A record loaded from the store has only the
// launch error's text ("code: message"), whose code is kept for timeouts and start-up failures (the sandbox's
// configuration, not the engine).
func launchFailure(id, msg string, typed *Error) *Error {
	code := CodeEngine
	details := map[string]any{"last_error": msg}
	switch {
	case typed != nil && typed.Code != CodeEngine:
		code = typed.Code
		for k, v := range typed.Details {
			details[k] = v
		}
	default:
		for _, c := range []string{CodeTimeout, CodeStartupFailed} {
			if strings.HasPrefix(msg, c+":") {
				code = c
			}
		}
	}
	return &Error{Code: code, Message: fmt.Sprintf("sandbox %s could not be started: %s", id, msg), Details: details}
}
