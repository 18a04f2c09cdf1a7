package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sweepFleetOrphans is the orphan sweep of a fleet's GC leader (gc.go). Every gateway of the fleet labels its
// containers with the one fleet instance, so the leader sees all of them, but its memory may lag a record another
// gateway wrote a moment ago: before it removes a container it reads every record from the source of truth
// (SharedStore.Fresh), after listing the containers, so a container whose record was written before it was listed
// is never taken for an orphan. The same fresh read finds warm members of other gateways past warm_max_age
// (a gateway killed for good leaves its pool behind; its successor has another identity).
//
// Workspace volumes are not swept in a fleet: spare volumes made ahead for copies and snapshot volumes are
// recorded only in their gateway's local store, so the leader cannot tell them from orphans, and losing a
// workspace is worse than keeping an orphan (docs/kubernetes.md, "Gateway fleet: sandbox state").
func (m *Manager) sweepFleetOrphans(ctx context.Context, st SharedStore, rep *GCReport) {
	match := map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance()}
	m.mu.RLock()
	minAge, warmMaxAge := m.cfg.OrphanMinAge, m.cfg.WarmMaxAge
	m.mu.RUnlock()
	containers, err := m.driver.List(ctx, match)
	if err != nil {
		rep.fail(GCOrphanContainers, "listing containers for the orphan sweep", err)
		m.log.Warn("listing containers for the orphan sweep", "error", err)
		return
	}
	recs, err := st.Fresh(ctx)
	if err != nil {
		rep.fail(GCOrphanContainers, "reading the shared sandbox records for the orphan sweep", err)
		m.log.Warn("reading the shared sandbox records for the orphan sweep", "error", err)
		return
	}
	now := time.Now()
	recorded := make(map[string]bool, len(recs))
	for _, r := range recs {
		if r.ContainerID != "" {
			recorded[r.ContainerID] = true
		}
	}
	m.removeOrphanContainers(ctx, containers, recorded, minAge, nil, now, rep)
	for _, r := range recs {
		if !r.Warm || m.ownWarm(r) || now.Sub(r.CreatedAt) <= warmMaxAge {
			continue
		}
		m.mu.RLock()
		_, known := m.entries[r.ID]
		m.mu.RUnlock()
		if known {
			continue
		}
		if err := m.removeForeignWarm(ctx, r); err != nil {
			rep.fail(GCWarm, "recycling another gateway's warm sandbox", err)
			m.log.Warn("recycling another gateway's warm sandbox", "sandbox", r.ID, "error", err)
			continue
		}
		rep.WarmRecycled++
		m.emit(Event{Type: EventGC, SandboxID: r.ID, Profile: r.Profile, Reason: "warm_recycled", Warm: true})
	}
}

// removeForeignWarm removes a warm member this gateway holds no entry for: container, its own workspace, record.
func (m *Manager) removeForeignWarm(ctx context.Context, r Record) error {
	var errs []error
	if r.ContainerID != "" {
		if err := m.driver.Remove(ctx, r.ContainerID); err != nil {
			errs = append(errs, fmt.Errorf("removing container: %w", err))
		}
	}
	if r.ManagedWorkspace {
		if err := m.driver.RemoveVolume(ctx, m.VolumeName(r.WorkspaceID)); err != nil {
			errs = append(errs, fmt.Errorf("removing workspace volume: %w", err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := m.store.Delete(r.ID); err != nil {
		return fmt.Errorf("deleting the record: %w", err)
	}
	return nil
}
