package sandboxes

import (
	"context"
	"time"
)

func (m *Manager) gcLoop() {
	defer m.wg.Done()
	m.mu.RLock()
	ticker := m.gcTicker
	m.mu.RUnlock()
	// keepTimer fires at the next TTL that pauses or stops its sandbox instead of deleting it (expiry.go): E2B's
	// autoPause promises the pause at the timeout, not up to a collector interval later.
	keepTimer := time.NewTimer(time.Hour)
	defer keepTimer.Stop()
	for {
		keepTimer.Stop()
		if now := m.clock(); !m.nextKeep(now).IsZero() {
			keepTimer.Reset(m.nextKeep(now).Sub(now))
		}
		select {
		case <-m.ctx.Done():
			return
		case <-m.expiryKick:
			continue // a TTL changed: re-arm the timer
		case <-keepTimer.C:
		case <-ticker.C:
		case <-m.gcKick:
		}
		ctx, cancel := context.WithTimeout(m.ctx, 5*time.Minute)
		m.CollectGarbage(ctx)
		cancel()
	}
}

// GCReport counts what one collection did.
type GCReport struct {
	IdleStopped int
	IdlePaused  int
	Expired     int
	// TimeoutKept counts sandboxes whose TTL paused or stopped them instead of deleting them (expiry.go).
	TimeoutKept      int
	WarmRecycled     int
	OrphanContainers int
	OrphanVolumes    int
	Errors           int
	// Failures says what each of the Errors was, by task, in the order they happened.
	Failures []GCFailure
	// Swept: the pass ran the orphan sweep (it is due once per OrphanMinAge).
	Swept bool
}

// GCTask names a part of a collection, for its failures.
type GCTask string

const (
	GCIdle             GCTask = "idle"              // stopping or pausing idle sandboxes
	GCExpired          GCTask = "expired"           // removing expired sandboxes
	GCTimeout          GCTask = "timeout"           // pausing or stopping sandboxes whose TTL keeps them
	GCWarm             GCTask = "warm"              // recycling stale, failed or old warm members
	GCOrphanContainers GCTask = "orphan_containers" // the orphan sweep's containers
	GCOrphanVolumes    GCTask = "orphan_volumes"    // the orphan sweep's volumes (workspaces, HOME seeds, snapshots)
)

// GCFailure is one thing a collection could not do (it retries at its next pass).
type GCFailure struct {
	Task GCTask
	Err  string
}

func (r *GCReport) fail(task GCTask, what string, err error) {
	r.Errors++
	r.Failures = append(r.Failures, GCFailure{Task: task, Err: what + ": " + err.Error()})
}

// CollectGarbage runs one collection now: idle sandboxes are stopped; expired ones and stale or old warm members
// are removed, and so are orphaned containers and volumes when the orphan sweep is due (sweepDue). Sandboxes under
// a lease are left alone.
func (m *Manager) CollectGarbage(ctx context.Context) GCReport {
	return m.collect(ctx, false)
}

// SweepOrphans runs one collection with the orphan sweep, due or not.
func (m *Manager) SweepOrphans(ctx context.Context) GCReport {
	return m.collect(ctx, true)
}

// RunGC is the collection an operator asks for now (a dialect's admin GC, through sandboxes/service): the same pass
// as the loop's, with the orphan sweep whether it is due or not. It waits for a pass in progress to end and then
// runs its own (collections are one at a time), so concurrent calls are safe and each sees a whole pass. Orphans
// younger than OrphanMinAge are still spared: they may belong to a create in flight.
func (m *Manager) RunGC(ctx context.Context) (GCReport, error) {
	if err := ctx.Err(); err != nil {
		return GCReport{}, err
	}
	return m.collect(ctx, true), nil
}

// GCState is the collector's settings and state, for an operator (a dialect's admin GC status).
type GCState struct {
	// Running: a collection is under way now (the loop's or one asked for).
	Running bool
	// Interval is how often the loop collects (GCInterval).
	Interval time.Duration
	// Collections counts the collections finished since the Manager started (the one Start asks for first).
	Collections uint64
	// Instance is this gateway's instance id (its containers' labels; the orphan sweep spares other instances').
	Instance string
	// Leader: this gateway runs the destructive parts (idle, expiry, orphans); false on a fleet's other gateways,
	// which recycle only their own warm members.
	Leader bool
}

// GCState reports the collector's settings and whether a collection runs now.
func (m *Manager) GCState() GCState {
	m.mu.RLock()
	interval := m.cfg.GCInterval
	m.mu.RUnlock()
	return GCState{Running: m.gcRunning.Load(), Collections: m.gcCollections.Load(), Interval: interval, Instance: m.Instance(), Leader: m.gcLeader()}
}

func (m *Manager) collect(ctx context.Context, sweepNow bool) GCReport {
	m.gcRun.Lock()
	defer m.gcRun.Unlock()
	m.gcRunning.Store(true)
	defer m.gcRunning.Store(false)
	defer m.gcCollections.Add(1)
	var rep GCReport
	now := m.clock()
	type job struct {
		e    *entry
		kind string
	}
	var jobs []job
	// In a fleet only the GC lease's holder stops, expires and sweeps (shared.go); every gateway still recycles the
	// stale or failed warm members it made itself, and writes its idle deadlines (flushAll).
	leader := m.gcLeader()
	m.mu.Lock()
	for _, e := range m.entries {
		if e.deleted {
			continue
		}
		if e.rec.Warm {
			stale := m.warmStaleLocked(e.rec) // warm_image.go
			old := now.Sub(e.rec.CreatedAt) > m.cfg.WarmMaxAge
			if ((stale || e.rec.Phase == PhaseFailed) && m.ownWarm(e.rec) || old && leader) && !e.launching {
				m.detachLocked(e)
				jobs = append(jobs, job{e, "warm"})
			}
			continue
		}
		if !leader {
			continue
		}
		if keepDue(e, now) {
			// Its TTL pauses or stops it instead (expiry.go), leases or not: E2B's timeout is hard, and a request
			// open through the edge (a background command's stream) just waits for the resume.
			jobs = append(jobs, job{e, "keep"})
			continue
		}
		if e.leases > 0 {
			continue
		}
		switch {
		case expired(e, now):
			m.detachLocked(e)
			jobs = append(jobs, job{e, "expired"})
		case idleDue(e, now): // running past its idle deadline, or idle-paused past its second one (pause.go)
			jobs = append(jobs, job{e, "idle"})
		}
	}
	m.mu.Unlock()
	for _, j := range jobs {
		switch j.kind {
		case "warm":
			if err := m.destroy(ctx, j.e, "warm member recycled"); err != nil {
				rep.fail(GCWarm, "recycling warm sandbox", err)
				m.log.Warn("recycling warm sandbox", "sandbox", j.e.rec.ID, "error", err)
				continue
			}
			rep.WarmRecycled++
			m.emit(Event{Type: EventGC, SandboxID: j.e.rec.ID, Profile: j.e.rec.Profile, Reason: "warm_recycled", Warm: true})
		case "expired":
			if err := m.destroy(ctx, j.e, "expired"); err != nil {
				rep.fail(GCExpired, "removing expired sandbox", err)
				m.log.Warn("removing expired sandbox", "sandbox", j.e.rec.ID, "error", err)
				continue
			}
			rep.Expired++
			m.emit(Event{Type: EventGC, SandboxID: j.e.rec.ID, Profile: j.e.rec.Profile, Owner: j.e.rec.Owner, Reason: "expired"})
		case "keep":
			did, err := m.keep(ctx, j.e)
			if err != nil {
				rep.fail(GCTimeout, "keeping sandbox at its timeout", err)
				m.log.Warn("keeping sandbox at its timeout", "sandbox", j.e.rec.ID, "error", err)
				continue
			}
			if did == "" {
				continue
			}
			rep.TimeoutKept++
			m.emit(Event{Type: EventGC, SandboxID: j.e.rec.ID, Profile: j.e.rec.Profile, Owner: j.e.rec.Owner, Reason: did})
		case "idle":
			did, err := m.collectIdle(ctx, j.e)
			if err != nil {
				rep.fail(GCIdle, "collecting idle sandbox", err)
				m.log.Warn("collecting idle sandbox", "sandbox", j.e.rec.ID, "action", did, "error", err)
				continue
			}
			switch did {
			case "":
				continue
			case "idle_paused":
				rep.IdlePaused++
			default:
				rep.IdleStopped++
			}
			m.emit(Event{Type: EventGC, SandboxID: j.e.rec.ID, Profile: j.e.rec.Profile, Owner: j.e.rec.Owner, Reason: did})
		}
	}
	if st := m.shared(); st == nil {
		if rep.Swept = m.sweepDue(now, sweepNow); rep.Swept {
			m.sweepOrphans(ctx, &rep)
			m.sweepSnapshotOrphans(ctx, &rep) // snapshots.go
		}
	} else if leader {
		// Snapshots are each gateway's own (its local store), so no gateway can tell another's snapshot volume
		// from an orphan: a fleet sweeps containers and old warm members only (fleet_gc.go).
		if rep.Swept = m.sweepDue(now, sweepNow); rep.Swept {
			m.sweepFleetOrphans(ctx, st, &rep)
		}
	}
	m.flushAll(rep.Swept || !leader) // a fleet's other gateways never sweep: they check every record each pass
	if rep.did() {
		m.log.Info("sandbox collection", "idle_stopped", rep.IdleStopped, "idle_paused", rep.IdlePaused, "expired", rep.Expired, "timeout_kept", rep.TimeoutKept, "warm_recycled", rep.WarmRecycled,
			"orphan_containers", rep.OrphanContainers, "orphan_volumes", rep.OrphanVolumes, "errors", rep.Errors)
	}
	kick(m.warmKick)
	return rep
}

// did says whether the pass did or failed anything.
func (r GCReport) did() bool {
	return r.IdleStopped+r.IdlePaused+r.Expired+r.TimeoutKept+r.WarmRecycled+r.OrphanContainers+r.OrphanVolumes+r.Errors > 0
}

// sweepDue reports whether this pass runs the orphan sweep, and if so marks it run. The sweep lists every container
// and workspace volume of the instance from the engine (in a fleet, it also reads every record from the cluster):
// work that grows with the sandboxes, for what is rare (a create cut off by a crash, a remove that failed). An
// orphan younger than OrphanMinAge is spared anyway, so sweeping once per OrphanMinAge (at the first pass, then once
// that much time has passed) still removes every orphan within twice OrphanMinAge of its making, and the passes in
// between cost the engine nothing.
func (m *Manager) sweepDue(now time.Time, force bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !force && !m.lastSweep.IsZero() && now.Sub(m.lastSweep) < m.cfg.OrphanMinAge {
		return false
	}
	m.lastSweep = now
	return true
}

// sweepOrphans removes containers and volumes of this namespace and instance that no sandbox owns, once they are
// older than the minimum orphan age (younger ones may belong to a create in flight).
func (m *Manager) sweepOrphans(ctx context.Context, rep *GCReport) {
	match := map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance()}
	m.mu.RLock()
	minAge, inherited := m.cfg.OrphanMinAge, m.inherited
	m.mu.RUnlock()
	now := time.Now()
	containers, err := m.driver.List(ctx, match)
	if err != nil {
		rep.fail(GCOrphanContainers, "listing containers for the orphan sweep", err)
		m.log.Warn("listing containers for the orphan sweep", "error", err)
		return
	}
	m.removeOrphanContainers(ctx, containers, nil, minAge, inherited, now, rep)
	m.sweepHomeSeeds(ctx, containers, minAge, now, rep)
	volumes, err := m.driver.ListVolumes(ctx, map[string]string{m.label(labelManaged): "true",
		m.label(labelInstance): m.Instance(), m.label(labelManagedWorkspace): "true"})
	if err != nil {
		rep.fail(GCOrphanVolumes, "listing volumes for the orphan sweep", err)
		m.log.Warn("listing volumes for the orphan sweep", "error", err)
		return
	}
	m.mu.RLock()
	used := map[string]bool{}
	for _, e := range m.entries {
		used[m.VolumeName(e.rec.WorkspaceID)] = true
	}
	// A sandbox being removed still owns its workspace: its destroy removes it (once its container is gone), and a
	// sweep that raced it would fail on a volume still mounted, or count the delete's work as its own.
	for _, e := range m.removing {
		used[m.VolumeName(e.rec.WorkspaceID)] = true
	}
	// Spares and copy targets whose sandbox is not recorded yet (spare_volume.go): read under the same lock as the
	// entries, and a target is let go only after its sandbox's entry exists, so one of the two always names it.
	for ws := range m.spares.held {
		used[m.VolumeName(ws)] = true
	}
	m.mu.RUnlock()
	for _, v := range volumes {
		if used[v.Name] || !orphanAged(v.Name, v.Created, now, minAge, inherited) {
			continue
		}
		if err := m.driver.RemoveVolume(ctx, v.Name); err != nil {
			// A volume still mounted by a container (ours or not) refuses removal; the next sweep retries.
			rep.fail(GCOrphanVolumes, "removing orphan volume", err)
			m.log.Warn("removing orphan volume", "volume", v.Name, "error", err)
			continue
		}
		rep.OrphanVolumes++
		m.emit(Event{Type: EventGC, Reason: "orphan_volume"})
	}
}

// orphanAged says whether an unowned object (a container's ID or a volume's name) made at created may be swept:
// once it is older than minAge (younger ones may belong to a create or copy in flight), or at once when it is
// inherited, listed at this Manager's start before it could make anything (listInherited): an earlier gateway
// process on the same store made it (bbolt's lock keeps a store to one process), and that process is gone, so
// nothing is in flight for it. That is how a gateway killed mid-copy (snapshot, fork) or mid-create leaves no
// half-made volume or container behind past the first sweep after its restart. (The engine's creation times have
// one-second precision, too coarse to compare with the start: a restart within the second would spare them.) A
// fleet passes no inherited set: its other gateways' objects may be in flight whenever this one started.
func orphanAged(name string, created, now time.Time, minAge time.Duration, inherited map[string]bool) bool {
	return now.Sub(created) >= minAge || inherited[name]
}

// listInherited records which containers and volumes of this namespace and instance exist before the Manager
// starts (orphanAged). Outside a fleet only; a failed listing leaves the sweep to orphan_min_age alone.
func (m *Manager) listInherited(ctx context.Context) {
	if m.shared() != nil {
		return
	}
	match := map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance()}
	inherited := map[string]bool{}
	containers, err := m.driver.List(ctx, match)
	if err != nil {
		m.log.Warn("listing containers at start for the orphan sweep", "error", err)
	}
	for _, c := range containers {
		inherited[c.ID] = true
	}
	volumes, err := m.driver.ListVolumes(ctx, match)
	if err != nil {
		m.log.Warn("listing volumes at start for the orphan sweep", "error", err)
	}
	for _, v := range volumes {
		inherited[v.Name] = true
	}
	m.mu.Lock()
	m.inherited = inherited
	m.mu.Unlock()
}

// removeOrphanContainers removes those of containers (listed by the managed and instance labels) that orphanAged
// allows, that no entry owns and whose ID recorded does not hold (a fleet's fresh read of every gateway's records;
// nil outside a fleet).
func (m *Manager) removeOrphanContainers(ctx context.Context, containers []ContainerState, recorded map[string]bool, minAge time.Duration, inherited map[string]bool, now time.Time, rep *GCReport) {
	// A network holder (Profile.NetworkSpares) belongs to the container that joined it, and goes with it; one that
	// nothing joined (a spare, or the holder of a container that is gone) goes once it is older than minAge.
	joined := map[string]bool{}
	for _, c := range containers {
		if c.JoinedTo != "" {
			joined[c.JoinedTo] = true
		}
	}
	for _, c := range containers {
		if !orphanAged(c.ID, c.Created, now, minAge, inherited) || recorded[c.ID] || joined[c.ID] {
			continue
		}
		id := c.Labels[m.label(labelID)]
		m.mu.RLock()
		e := m.entries[id]
		r := m.removing[id] // being removed: its destroy removes the container
		owned := e != nil && e.rec.ContainerID == c.ID || r != nil && r.rec.ContainerID == c.ID
		m.mu.RUnlock()
		if owned {
			continue
		}
		if err := m.driver.Remove(ctx, c.ID); err != nil {
			rep.fail(GCOrphanContainers, "removing orphan container", err)
			m.log.Warn("removing orphan container", "container", c.ID, "error", err)
			continue
		}
		if id != "" && e == nil {
			if err := m.removeSocketDir(id); err != nil {
				m.log.Warn("removing orphan socket directory", "sandbox", id, "error", err)
			}
		}
		rep.OrphanContainers++
		m.emit(Event{Type: EventGC, SandboxID: id, Reason: "orphan_container"})
	}
}

// sweepHomeSeeds removes the HOME seed volumes of injected sandboxes (ContainerSpec.HomeSeedLabels) that no
// sandbox owns: a gateway that died between making one and making its container leaves it, and so does a remove
// whose volume step failed. One is kept while its sandbox has an entry (a create in flight makes its entry before
// its volumes, and keeps it until it fails and removes what it made) or a container of containers, listed before the
// volumes; and, as every orphan, while it is younger than minAge.
func (m *Manager) sweepHomeSeeds(ctx context.Context, containers []ContainerState, minAge time.Duration, now time.Time, rep *GCReport) {
	vols, err := m.driver.ListVolumes(ctx, map[string]string{m.label(labelManaged): "true",
		m.label(labelInstance): m.Instance(), m.label(labelHomeSeed): "true"})
	if err != nil {
		rep.fail(GCOrphanVolumes, "listing HOME seed volumes for the orphan sweep", err)
		m.log.Warn("listing HOME seed volumes for the orphan sweep", "error", err)
		return
	}
	if len(vols) == 0 {
		return
	}
	owned := map[string]bool{}
	for _, c := range containers {
		if id := c.Labels[m.label(labelID)]; id != "" {
			owned[id] = true
		}
	}
	for _, v := range vols {
		id := v.Labels[m.label(labelID)]
		m.mu.RLock()
		live := m.entries[id] != nil || m.removing[id] != nil
		m.mu.RUnlock()
		if id == "" || live || owned[id] || now.Sub(v.Created) < minAge {
			continue
		}
		if err := m.driver.RemoveVolume(ctx, v.Name); err != nil {
			// Still mounted by a container the listing missed: the engine refuses, and the next sweep looks again.
			rep.fail(GCOrphanVolumes, "removing orphan HOME seed volume", err)
			m.log.Warn("removing orphan HOME seed volume", "volume", v.Name, "error", err)
			continue
		}
		rep.OrphanVolumes++
		m.emit(Event{Type: EventGC, SandboxID: id, Reason: "orphan_home_seed"})
	}
}
