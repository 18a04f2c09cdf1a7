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
