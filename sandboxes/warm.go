package sandboxes

import (
	"time"

	"golang.org/x/time/rate"
)

// warmLoop keeps every profile's warm pool at its size: immediately after a claim (kicked), and on a short tick
// while a pool is short because of the refill rate limit or the global cap.
func (m *Manager) warmLoop() {
	defer m.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.warmKick:
		case <-tick.C:
		}
		m.refillWarm()
	}
}

func (m *Manager) refillWarm() {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || !m.started {
		return
	}
	members := map[string]int{}
	for _, e := range m.entries {
		if e.rec.Warm && !e.deleted && e.rec.Phase != PhaseFailed {
			members[e.rec.ProfileHash]++
		}
	}
	for _, p := range m.profiles {
		if p.WarmPoolSize <= 0 {
			continue
		}
		hash := p.Hash()
		l := m.limiters[hash]
		if l == nil {
			l = rate.NewLimiter(rate.Limit(m.cfg.WarmRefillPerSecond), max(1, p.WarmPoolSize))
			m.limiters[hash] = l
		}
		for n := members[hash]; n < p.WarmPoolSize; n++ {
			if m.cfg.MaxSandboxes > 0 && len(m.entries) >= m.cfg.MaxSandboxes {
				return
			}
			if !l.AllowN(now, 1) {
				break
			}
			m.newEntryLocked(p, "", nil, "", nil, true, now)
		}
	}
}
