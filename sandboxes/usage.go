package sandboxes

import (
	"context"
	"sync"
)

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
		if seen[id] || !visible(e) || e.rec.ContainerID == "" ||
			(e.rec.Phase != PhaseRunning && e.rec.Phase != PhasePaused) {
			continue
		}
		seen[id] = true
		queries = append(queries, query{id, e.rec.ContainerID})
	}
	m.mu.RUnlock()
	// All at once: the Docker driver reads the cgroups in microseconds, but where it must ask the engine a sample
	// can take up to its collector's interval (a second on Docker 20.10, whose one-shot stats wait for the next
	// collection), and one container after another made the console's list take a second per running sandbox
	// until its 3 s bound; in parallel it takes one interval.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, q := range queries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ctx.Err() != nil {
				return
			}
			u, err := ud.Usage(ctx, q.containerID)
			if err != nil {
				return
			}
			mu.Lock()
			out[q.id] = u
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
