package sandboxes

import (
	"context"
	"fmt"
	"time"
)

// What a sandbox's TTL does. By default it deletes the sandbox. A sandbox created with an expiry action
// (CreateRequest.OnExpire, E2B's autoPause) is kept instead: ExpirePause freezes its processes (the cgroup
// freezer, as Pause does), ExpireStop stops its container (memory and processes dropped, workspace kept). Either way
// its ExpiresAt moves to the end of a bounded retention (ExpiryRetention), so a sandbox nobody resumes is still
// deleted; a resume (any request that wakes it: Resume, EnsureRunning) gives it its last TTL again (ResumeTTL) and
// its next timeout does the same again. The action, the moment it happened and the TTL to give back are in the
// Record, so a reload or a killed gateway keeps them.

// Expiry actions.
const (
	ExpirePause = "pause" // freeze at the TTL: processes and memory kept, resumed in place
	ExpireStop  = "stop"  // stop at the TTL: workspace kept, processes lost, started again on resume
)

// DefaultExpiryRetention is how long a sandbox its TTL paused or stopped is kept before it is deleted, unless it
// resumes first. A frozen sandbox holds its memory on the host, so this bounds what nobody comes back to.
const DefaultExpiryRetention = 24 * time.Hour

// checkOnExpire checks a create's expiry action against the engine.
func (m *Manager) checkOnExpire(action string) error {
	switch action {
	case "", ExpireStop:
		return nil
	case ExpirePause:
		_, err := m.pauser()
		return err
	}
	return Errorf(CodeInvalid, "on_expire must be %q, %q or empty (delete), not %q", ExpirePause, ExpireStop, action)
}

// setOnExpire records a new sandbox's expiry action. The caller holds m.mu.
func setOnExpire(e *entry, action string, ttl time.Duration) {
	e.rec.OnExpire = action
	e.rec.ExpiredAt = nil
	e.rec.ResumeTTL = 0
	if action != "" {
		e.rec.ResumeTTL = ttl
	}
}

// keepDue reports whether the collector has expiry work on e: its TTL passed and its action keeps it (pause or
// stop it now), or it is recorded as kept but runs (a gateway that died between recording the pause and freezing
// the container adopts it running). The caller holds m.mu.
func keepDue(e *entry, now time.Time) bool {
	if e.rec.OnExpire == "" || e.launching || e.deleted || e.rec.Warm {
		return false
	}
	if e.rec.ExpiredAt == nil {
		return pastTTL(e, now)
	}
	return e.rec.Phase == PhaseRunning && !expired(e, now)
}

// wakeLocked ends a keep: the sandbox resumed (thawed or started), so it lives its last TTL again. The caller holds
// m.mu and persists e.
func (m *Manager) wakeLocked(e *entry, now time.Time) {
	if e.rec.ExpiredAt == nil {
		return
	}
	e.rec.ExpiredAt = nil
	if e.rec.ResumeTTL > 0 {
		t := now.Add(e.rec.ResumeTTL)
		e.rec.ExpiresAt = &t
	}
	kick(m.expiryKick)
}

// keep does e's expiry action instead of deleting it. It reports what it did: "" (nothing: the sandbox changed
// since the scan), "timeout_paused" or "timeout_stopped". The record is written before the engine call, as pause
// does; if neither freezing nor stopping works, the keep is undone and the sandbox is left expired, so the next
// pass tries again and requests see it expired meanwhile.
func (m *Manager) keep(ctx context.Context, e *entry) (string, error) {
	now := m.clock()
	m.mu.Lock()
	if !keepDue(e, now) {
		m.mu.Unlock()
		return "", nil
	}
	action, phase := e.rec.OnExpire, e.rec.Phase
	if phase == PhaseCreating || phase == PhaseStarting {
		m.mu.Unlock()
		return "", nil // a start in flight: the next pass looks again
	}
	prevExpires, prevExpired := e.rec.ExpiresAt, e.rec.ExpiredAt
	if e.rec.ExpiredAt == nil {
		at := now
		end := now.Add(m.cfg.ExpiryRetention)
		e.rec.ExpiredAt, e.rec.ExpiresAt = &at, &end
	}
	e.rec.IdleExpiresAt = nil
	m.mu.Unlock()
	m.persist(e)
	if phase != PhaseRunning && (phase != PhasePaused || action != ExpireStop) {
		// Stopped, failed or already frozen: nothing runs that the action would change.
		return "timeout_" + map[string]string{ExpirePause: "paused", ExpireStop: "stopped"}[action], nil
	}
	var err error
	if action == ExpirePause {
		if _, perr := m.pauser(); perr == nil {
			if err = m.pause(ctx, e, "timeout", false); err == nil {
				return "timeout_paused", nil
			}
			m.log.Warn("pausing a sandbox at its timeout failed; stopping it instead", "sandbox", e.rec.ID, "error", err)
		}
	}
	if err = m.stopIf(ctx, e, "timeout", nil); err == nil {
		return "timeout_stopped", nil
	}
	m.mu.Lock()
	if !e.deleted && e.rec.ExpiredAt != nil && prevExpired == nil {
		e.rec.ExpiresAt, e.rec.ExpiredAt = prevExpires, nil
	}
	m.mu.Unlock()
	m.persist(e)
	return "", fmt.Errorf("keeping sandbox %s at its timeout (%s): %w", e.rec.ID, action, err)
}

// nextKeep is the soonest future TTL of a sandbox whose TTL keeps it, for the collector's timer (zero: none). Past
// ones are left to the collector's passes, so one whose keep failed never spins the timer.
func (m *Manager) nextKeep(now time.Time) time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var next time.Time
	for _, e := range m.entries {
		if e.rec.OnExpire == "" || e.rec.ExpiredAt != nil || e.rec.ExpiresAt == nil || e.deleted || e.rec.Warm {
			continue
		}
		if t := *e.rec.ExpiresAt; t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}
