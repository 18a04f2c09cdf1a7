package sandboxes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// reconcile loads the store and matches it with the engine's containers: what is still there is adopted (running
// ones wait for their agent again, in the background), what is gone is marked dead (removed). Containers nobody
// owns are left to the orphan sweep, which respects the minimum age.
func (m *Manager) reconcile(ctx context.Context) error {
	recs, err := m.store.Load()
	if err != nil {
		return fmt.Errorf("loading the sandbox store: %w", err)
	}
	containers, err := m.driver.List(ctx, map[string]string{m.label(labelManaged): "true"})
	if err != nil {
		return fmt.Errorf("listing our containers: %w", err)
	}
	byID := make(map[string]ContainerState, len(containers))
	for _, c := range containers {
		byID[c.ID] = c
	}
	now := time.Now()
	var adopted, dead, dropped int
	var toPersist, toDestroy, toThaw []*entry
	m.mu.Lock()
	for _, rec := range recs {
		if rec.Warm && !m.ownWarm(rec) {
			// Another fleet gateway's warm member (shared.go): its maker claims it, the GC leader recycles it.
			continue
		}
		e := &entry{rec: rec, lastPersist: now}
		e.stored, _ = json.Marshal(rec) // as the store holds it: flushAll writes it only once it changes
		if rec.Spec != nil {
			e.profile = *rec.Spec
		} else if p, ok := m.profiles[rec.Profile]; ok {
			e.profile = p
		}
		c, found := byID[rec.ContainerID]
		if rec.ContainerID == "" {
			found = false
		}
		m.entries[rec.ID] = e
		m.indexLocked(e)
		switch {
		case rec.Warm && (!found || !c.Running || rec.Phase == PhaseFailed):
			m.detachLocked(e)
			toDestroy = append(toDestroy, e)
			dropped++
		case rec.Died != nil:
			// Already dead before the restart: rebuilt on its next use, or failed for good past its crash limit.
		case !found && (rec.Phase == PhaseCreating || rec.ContainerID == ""):
			// The create never reached the engine (or its container was cleaned up after a failed start).
			if rec.Phase != PhaseFailed {
				e.rec.Phase = PhaseStopped
			}
			e.rec.IdleExpiresAt = nil
			toPersist = append(toPersist, e)
		case !found:
			m.noteDeathLocked(e, &Death{Reason: "removed", ExitCode: -1, At: now, Message: "container removed while the gateway was down"})
			toPersist = append(toPersist, e)
			dead++
		case c.Paused && (rec.Phase == PhaseRunning || rec.Phase == PhaseStarting):
			// Frozen without a recorded pause: the previous gateway died while it held the sandbox frozen for a
			// workspace copy (snapshot, fork), or an operator paused it. Recorded paused, thawed below, then adopted.
			e.rec.Phase = PhasePaused
			toThaw = append(toThaw, e)
		case c.Paused && rec.Phase == PhasePaused:
			// Still frozen as recorded (asked, idle or at its TTL: expiry.go): it stays paused, and the next request
			// thaws it. Adopting it would probe an agent that cannot answer.
			adopted++
		case c.Running:
			// Adopt: the agent is probed again before the sandbox counts as ready; the idle deadline is kept.
			e.rec.Phase = PhaseStarting
			e.adopting = true
			m.beginLaunchLocked(e)
			adopted++
		case rec.Phase == PhaseRunning || rec.Phase == PhaseStarting:
			// It stopped while nobody watched. A signal or OOM is a death; a clean exit (host reboot, engine
			// restart) is treated like an idle stop: the next use starts it again.
			if c.OOMKilled || c.ExitCode == 137 || c.ExitCode == 139 {
				m.noteDeathLocked(e, classifyDeath(c.ExitCode, c.OOMKilled, time.Time{}, c.FinishedAt))
				dead++
			} else {
				e.rec.Phase = PhaseStopped
			}
			e.rec.IdleExpiresAt = nil
			toPersist = append(toPersist, e)
		default:
			adopted++
		}
	}
	m.mu.Unlock()
	for _, e := range toThaw {
		m.thawAndAdopt(ctx, e)
	}
	for _, e := range toPersist {
		m.persist(e)
	}
	for _, e := range toDestroy {
		m.destroyDetached(e, "warm member lost in restart")
	}
	m.log.Info("sandbox store reconciled", "records", len(recs), "adopted", adopted, "dead", dead, "warm_dropped", dropped)
	return nil
}

// thawAndAdopt thaws a sandbox reconcile found frozen without a recorded pause and adopts it like a running one
// (its agent is probed again). One that cannot be thawed stays recorded paused: the next request tries again.
func (m *Manager) thawAndAdopt(ctx context.Context, e *entry) {
	pd, err := m.pauser()
	if err == nil {
		err = pd.Unpause(ctx, e.rec.ContainerID)
	}
	if err != nil {
		m.log.Warn("thawing a sandbox found frozen at start", "sandbox", e.rec.ID, "error", err)
		m.persist(e)
		return
	}
	m.mu.Lock()
	e.rec.Phase = PhaseStarting
	e.adopting = true
	m.beginLaunchLocked(e)
	m.mu.Unlock()
}
