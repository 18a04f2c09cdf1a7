package sandboxes

import (
	"fmt"
	"time"
)

// Crash recovery follows Bay's contract: the sandbox is the stable unit and a dead session is rebuilt. A container
// that dies (OOM, a signal, a non-zero exit, removed behind our back) leaves the sandbox "died": its status reads
// idle with the reason in last_error, and the next call rebuilds the container on the same workspace. That first
// call answers a retryable session_not_ready naming the reason (the caller must learn that its process state is
// gone); calls during the rebuild answer the same; once the agent is ready calls succeed again. A profile's crash
// limit stops a crash loop: one death more than the limit inside the window and the sandbox stays failed.

// Defaults of a profile's crash limit.
const (
	DefaultCrashLimit  = 3
	DefaultCrashWindow = 10 * time.Minute
)

// HintRecovering is what a client should do while a dead sandbox is being rebuilt.
const HintRecovering = "retry shortly: the sandbox is being rebuilt on the same workspace; processes, kernels and memory state of the dead container are gone"

// EventRecovering is sent when the rebuild of a dead sandbox begins (Reason: the death's reason).
const EventRecovering = "recovering"

// crashLimits is the profile's effective crash limit (-1: none tolerated) and window.
func (p *Profile) crashLimits() (int, time.Duration) {
	limit, window := p.CrashLimit, p.CrashWindow.Std()
	if limit == 0 {
		limit = DefaultCrashLimit
	}
	if window <= 0 {
		window = DefaultCrashWindow
	}
	return limit, window
}

// noteDeathLocked records a death of e's container: e becomes died (rebuilt on its next use) or, past the profile's
// crash limit, failed for good. It reports whether the crash limit was passed. The caller holds m.mu.
func (m *Manager) noteDeathLocked(e *entry, d *Death) (crashLoop bool) {
	limit, window := e.profile.crashLimits()
	kept := e.rec.Crashes[:0:0]
	for _, c := range e.rec.Crashes {
		if d.At.Sub(c.At) < window {
			kept = append(kept, c)
		}
	}
	kept = append(kept, *d)
	if n := max(limit+1, 1); len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	e.rec.Crashes = kept
	e.rec.Died = d
	e.rec.IdleExpiresAt = nil
	e.rec.LastError = fmt.Sprintf("%s: %s: %s (exit %d)", CodeContainerDied, d.Reason, d.Message, d.ExitCode)
	e.recovering = false
	if limit < 0 || len(kept) > limit {
		e.rec.Phase = PhaseFailed
		e.rec.LastError = fmt.Sprintf("%s: crash loop: %d deaths within %s, the limit is %d; last: %s: %s (exit %d)",
			CodeContainerDied, len(kept), window, max(limit, 0), d.Reason, d.Message, d.ExitCode)
		return true
	}
	e.rec.Phase = PhaseDied
	return false
}

// recoverLocked answers EnsureRunning for a sandbox whose container died: a crash-looped one stays failed
// (container_died), a died one starts its rebuild, and one being rebuilt says so. ok is false when e is none of
// these. The caller holds m.mu.
func (m *Manager) recoverLocked(e *entry) (err error, ok bool) {
	switch {
	case e.rec.Phase == PhaseFailed && e.rec.Died != nil:
		limit, window := e.profile.crashLimits()
		derr := diedError(e.rec.ID, e.rec.Died).(*Error)
		if len(e.rec.Crashes) > 0 {
			derr.Message = fmt.Sprintf("sandbox %s: its container died %d times within %s (last: %s); it stays failed",
				e.rec.ID, len(e.rec.Crashes), window, e.rec.Died.Message)
			derr.Details["crashes"] = len(e.rec.Crashes)
			derr.Details["crash_limit"] = max(limit, 0)
			derr.Details["crash_window_seconds"] = window.Seconds()
		}
		return derr, true
	case e.rec.Phase == PhaseDied && e.rec.Died != nil && e.launching:
		// It died while a launch was under way: that launch ends first (it was cancelled), then a call rebuilds.
		return recoveringError(e.rec.ID, *e.rec.Died), true
	case e.rec.Phase == PhaseDied && e.rec.Died != nil:
		d := *e.rec.Died
		// The death stays in Crashes and LastError; Died is cleared so a death during the rebuild is its own.
		e.rec.Died = nil
		e.rec.Phase = PhaseStarting
		e.recovering = true
		m.beginLaunchLocked(e)
		m.emitLocked(Event{Type: EventRecovering, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Reason: d.Reason, Death: &d})
		go m.persist(e)
		return recoveringError(e.rec.ID, d), true
	case e.recovering && len(e.rec.Crashes) > 0:
		return recoveringError(e.rec.ID, e.rec.Crashes[len(e.rec.Crashes)-1]), true
	}
	return nil, false
}

func recoveringError(id string, d Death) error {
	return &Error{Code: CodeNotReady,
		Message: fmt.Sprintf("sandbox %s: its container died (%s); it is being rebuilt on the same workspace", id, d.Message),
		Hint:    HintRecovering,
		Details: map[string]any{"reason": d.Reason, "exit_code": d.ExitCode, "at": d.At, "recovering": true, "retry_after_ms": 1000}}
}
