package sandboxes

import "context"

// MaxUsageQueries bounds the containers one Usage call asks the engine about: the console's list asks for every
// running sandbox it shows, and each is one engine call.
const MaxUsageQueries = 64

// Usage reports the resource use of the running sandboxes among ids, from the driver's engine. Ids that are not
// running, unknown, beyond MaxUsageQueries or whose sample failed are absent: a glance at usage must never fail
// the list it decorates. An engine that reports no usage gives an empty map.
func (m *Manager) Usage(ctx context.Context, ids []string) map[string]Usage {
	out := map[string]Usage{}
	ud, ok := m.driver.(UsageDriver)
	if !ok {
		return out
	}
	type query struct{ id, containerID string }
	var queries []query
	seen := map[string]bool{}
	m.mu.RLock()
	for _, id := range ids {
		if len(queries) >= MaxUsageQueries {
			break
		}
		e := m.entries[id]
		if seen[id] || e == nil || e.rec.Warm || e.deleted || e.rec.ContainerID == "" ||
			(e.rec.Phase != PhaseRunning && e.rec.Phase != PhasePaused) {
			continue
		}
		seen[id] = true
		queries = append(queries, query{id, e.rec.ContainerID})
	}
	m.mu.RUnlock()
	for _, q := range queries {
		if ctx.Err() != nil {
			break
		}
		u, err := ud.Usage(ctx, q.containerID)
		if err != nil {
			continue
		}
		out[q.id] = u
	}
	return out
}
