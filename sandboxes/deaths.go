package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// watchEvents follows the engine's die/oom/destroy events for our containers, resubscribing when the stream
// breaks and re-inspecting running sandboxes so a death during the gap is not missed.
func (m *Manager) watchEvents() {
	defer m.wg.Done()
	for {
		events, errs := m.driver.Events(m.ctx, m.label(labelManaged), "true")
	stream:
		for {
			select {
			case <-m.ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					break stream
				}
				m.handleEvent(ev)
			case err := <-errs:
				if m.ctx.Err() != nil {
					return
				}
				m.log.Warn("container event stream ended; resubscribing", "error", err)
				break stream
			}
		}
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(time.Second):
		}
		m.recheckRunning()
	}
}

func (m *Manager) handleEvent(ev ContainerEvent) {
	id := ev.Labels[m.label(labelID)]
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.rec.ContainerID != ev.ContainerID || e.deleted {
		m.mu.Unlock()
		return
	}
	switch ev.Action {
	case "oom":
		e.lastOOM = ev.At
		alive := e.rec.Phase == PhaseRunning
		m.mu.Unlock()
		if alive {
			// A process inside was OOM-killed; whether the container follows shows in its die event.
			m.emit(Event{Type: EventOOM, SandboxID: id, Profile: e.rec.Profile, Owner: e.rec.Owner, Reason: "oom", At: ev.At})
		}
		return
	case "die", "destroy":
	default:
		m.mu.Unlock()
		return
	}
	if e.expectStop || (e.rec.Phase != PhaseRunning && e.rec.Phase != PhaseStarting) {
		m.mu.Unlock()
		return
	}
	lastOOM := e.lastOOM
	cid := e.rec.ContainerID
	m.mu.Unlock()

	var death *Death
	if ev.Action == "destroy" {
		death = &Death{Reason: "removed", ExitCode: -1, At: ev.At, Message: "container removed"}
	} else {
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		st, err := m.driver.Inspect(ctx, cid)
		cancel()
		switch {
		case errors.Is(err, ErrContainerNotFound):
			death = &Death{Reason: "removed", ExitCode: -1, At: ev.At, Message: "container removed"}
		case err != nil:
			death = classifyDeath(ev.ExitCode, false, lastOOM, ev.At)
		default:
			if st.Running {
				return // restarted in between (not by us, but alive)
			}
			if m.exitRecorded(e, st.FinishedAt) {
				return // CheckAgentLoss recorded this exit before its event came (its rebuild may be under way)
			}
			death = classifyDeath(st.ExitCode, st.OOMKilled, lastOOM, ev.At)
		}
	}
	m.recordDeath(e, cid, death)
}

func (m *Manager) recordDeath(e *entry, cid string, death *Death) {
	m.mu.Lock()
	if e.deleted || e.expectStop || e.rec.ContainerID != cid || e.rec.Died != nil {
		m.mu.Unlock()
		return
	}
	crashLoop := m.noteDeathLocked(e, death) // recovery.go
	if e.cancelLaunch != nil {
		e.cancelLaunch()
	}
	warm := e.rec.Warm
	if warm {
		m.detachLocked(e)
	}
	m.mu.Unlock()
	m.log.Warn("sandbox container died", "sandbox", e.rec.ID, "reason", death.Reason, "exit_code", death.ExitCode)
	if warm {
		m.destroyDetached(e, "warm member died")
		return
	}
	m.persist(e)
	m.emit(Event{Type: EventDied, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Reason: death.Reason, Death: death, At: death.At})
	if crashLoop {
		m.emit(Event{Type: EventFailed, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Reason: "crash_loop", Death: death})
	}
}

// classifyDeath names why a container stopped: exit 137 is SIGKILL (the OOM killer's signal too, so a recent oom
// event or OOMKilled makes it oom), 139 SIGSEGV, 143 SIGTERM, anything else its exit code.
func classifyDeath(code int, oomKilled bool, lastOOM, at time.Time) *Death {
	d := &Death{ExitCode: code, At: at}
	recentOOM := !lastOOM.IsZero() && at.Sub(lastOOM) < 10*time.Second && at.Sub(lastOOM) > -10*time.Second
	switch {
	case oomKilled || (code == 137 && recentOOM):
		d.Reason, d.Message = "oom", "killed by the out-of-memory killer; the sandbox needs more memory or less data"
	case code == 137:
		d.Reason, d.Message = "sigkill", "killed by SIGKILL"
	case code == 139:
		d.Reason, d.Message = "sigsegv", "crashed with SIGSEGV"
	case code == 143:
		d.Reason, d.Message = "sigterm", "terminated by SIGTERM"
	default:
		d.Reason, d.Message = "exit", fmt.Sprintf("exit %d", code)
	}
	return d
}

// recheckRunning inspects every running sandbox once (after an event-stream gap).
func (m *Manager) recheckRunning() {
	m.mu.RLock()
	var check []*entry
	for _, e := range m.entries {
		if (e.rec.Phase == PhaseRunning) && e.rec.ContainerID != "" && !e.deleted {
			check = append(check, e)
		}
	}
	m.mu.RUnlock()
	for _, e := range check {
		m.mu.RLock()
		cid := e.rec.ContainerID
		m.mu.RUnlock()
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		st, err := m.driver.Inspect(ctx, cid)
		cancel()
		switch {
		case errors.Is(err, ErrContainerNotFound):
			m.recordDeath(e, cid, &Death{Reason: "removed", ExitCode: -1, At: time.Now(), Message: "container removed"})
		case err == nil && !st.Running:
			m.recordDeath(e, cid, classifyDeath(st.ExitCode, st.OOMKilled, time.Time{}, st.FinishedAt))
		}
	}
}

// exitRecorded says whether e's latest recorded death is the container's exit that ended at finished: CheckAgentLoss
// records a death at the engine's FinishedAt, and the die event of that same exit, arriving later, is not another.
func (m *Manager) exitRecorded(e *entry, finished time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := len(e.rec.Crashes)
	return !finished.IsZero() && n > 0 && e.rec.Crashes[n-1].At.Equal(finished)
}

// CheckAgentLoss is for a caller whose call to sandbox id's agent failed in transport (the connection reset or
// refused): it asks the engine whether the container still runs. When it does not (the agent is the container's
// main process, so tenant code or the OOM killer that kills it ends the container), the death is recorded now, as
// its die event would record it, and the rebuild on the same workspace begins, as the next call would begin it
// (recovery.go). It returns the typed error for the caller to answer: session_not_ready with the death while the
// sandbox is rebuilt, container_died past its crash limit. Without it the engine's die event, which can lag the
// failed call by seconds on a busy host, would leave the next calls going to the dead agent for bare transport
// failures. nil means the container runs, or the engine cannot tell: the caller keeps its own error.
func (m *Manager) CheckAgentLoss(ctx context.Context, id string) error {
	m.mu.RLock()
	e := m.entries[id]
	if e == nil || e.deleted {
		m.mu.RUnlock()
		return nil
	}
	cid, phase, expect, lastOOM, died := e.rec.ContainerID, e.rec.Phase, e.expectStop, e.lastOOM, e.rec.Died != nil
	m.mu.RUnlock()
	if !died {
		if cid == "" || expect || (phase != PhaseRunning && phase != PhaseStarting) {
			return nil
		}
		st, err := m.driver.Inspect(ctx, cid)
		var death *Death
		switch {
		case errors.Is(err, ErrContainerNotFound):
			death = &Death{Reason: "removed", ExitCode: -1, At: time.Now(), Message: "container removed"}
		case err != nil || st.Running:
			return nil
		default:
			at := st.FinishedAt
			if at.IsZero() {
				at = time.Now()
			}
			death = classifyDeath(st.ExitCode, st.OOMKilled, lastOOM, at)
		}
		m.recordDeath(e, cid, death)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.deleted || m.closed {
		return nil
	}
	if err, ok := m.recoverLocked(e); ok {
		return err
	}
	return nil // stopped on purpose or rebuilt meanwhile: not this caller's death
}
