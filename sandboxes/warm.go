package sandboxes

import (
	"context"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// The warm pool follows demand. Per profile it remembers create arrivals over warm_demand_window and the measured
// time from launch to ready (the cold start). A member claimed now is replaced one cold start later at the
// earliest, and later still when more are claimed than refills run at once, so the pool must hold what arrives
// before its claimed members can be back (demandBeforeRefill): its target is that peak times headroom,
// never below warm_pool (the floor) and never above warm_pool_max (or warm_pool when no max is set) or what
// max_sandboxes leaves. Once the peak leaves the window the target falls back and the surplus is removed.
//
// Refills run at the concurrency the engine measurably sustains best (concurrencyTuner), behind every user
// create waiting for a start slot (startQueue). A refill that fails (a broken image) makes the pool back off,
// doubling from warm_retry_backoff up to 5m, with an EventWarmBackoff each time, instead of looping.

// EventWarmBackoff is sent when a warm refill failed and the pool pauses its refills (Profile; Reason: the
// error; Duration: the pause).
const EventWarmBackoff = "warm_backoff"

// LaunchPrestarted marks a sandbox claimed from the warm pool while it was still starting: it becomes ready
// sooner than a cold create would.
const LaunchPrestarted = "prestarted"

// poolState is one profile's adaptive pool; fields are guarded by Manager.mu.
type poolState struct {
	demand      demandWindow
	coldStart   ewma // seconds from launch to ready, over this profile's fresh launches
	lastRefill  time.Duration
	target      int
	hits        uint64
	prestarted  uint64
	misses      uint64
	refills     uint64
	refillFails uint64
	failures    int // in a row
	// unguessable is set once a create asked for an unguessable id (CreateRequest.UnguessableID): members made
	// since carry such ids, so those creates can claim them (an ordinary create takes either kind).
	unguessable bool
	backoff     time.Time
	lastError   string
}

// PoolStats describes one profile's warm pool (the admin API and metrics show it).
type PoolStats struct {
	Profile string `json:"profile"`
	// Floor and Max bound Target (warm_pool, warm_pool_max).
	Floor  int `json:"floor"`
	Max    int `json:"max"`
	Target int `json:"target"`
	// Ready members wait to be claimed; Starting ones are being refilled.
	Ready    int `json:"ready"`
	Starting int `json:"starting"`
	// HeldRefills are refills waiting for a claimed sandbox's first call (warm_hold.go).
	HeldRefills int `json:"held_refills"`
	// Hits are creates served by a ready member, Prestarted by one still starting, Misses by a cold create.
	Hits       uint64 `json:"hits"`
	Prestarted uint64 `json:"prestarted"`
	Misses     uint64 `json:"misses"`
	// PeakDemand is the most creates seen before a claimed member could be back (one cold start, or more when the
	// claims outnumber the refill slots) over the demand window: what Target is made from.
	PeakDemand     int     `json:"peak_demand"`
	ColdStartSec   float64 `json:"cold_start_seconds"`
	LastRefillSec  float64 `json:"last_refill_seconds"`
	Refills        uint64  `json:"refills"`
	RefillFailures uint64  `json:"refill_failures"`
	// BackoffUntil is set while refills pause after failures; LastError says why.
	BackoffUntil *time.Time `json:"backoff_until,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
}

// WarmPools reports every profile's pool, sorted by profile, and the refill concurrency in use.
func (m *Manager) WarmPools() (pools []PoolStats, refillConcurrency int) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	ready, starting := m.warmCountsLocked()
	held, _ := m.holds.active(now)
	limit := m.tuner.limit()
	for _, p := range m.profiles {
		ps := m.poolLocked(p.ID)
		hash := p.Hash()
		s := PoolStats{Profile: p.ID, Floor: p.WarmPoolSize, Max: p.warmCeiling(), Target: ps.target,
			Ready: ready[hash], Starting: starting[hash], HeldRefills: held[hash], Hits: ps.hits, Prestarted: ps.prestarted, Misses: ps.misses,
			PeakDemand:    m.demandLocked(ps, limit),
			ColdStartSec:  m.coldStartLocked(ps).Seconds(),
			LastRefillSec: ps.lastRefill.Seconds(), Refills: ps.refills, RefillFailures: ps.refillFails, LastError: ps.lastError}
		if now.Before(ps.backoff) {
			t := ps.backoff
			s.BackoffUntil = &t
		}
		pools = append(pools, s)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Profile < pools[j].Profile })
	return pools, limit
}

// warmCeiling is the most members the profile's pool may hold.
func (p *Profile) warmCeiling() int { return max(p.WarmPoolSize, p.WarmPoolMax) }

func (m *Manager) poolLocked(profile string) *poolState {
	ps := m.pools[profile]
	if ps == nil {
		ps = &poolState{}
		m.pools[profile] = ps
	}
	return ps
}

// defaultColdStart stands in for the measurement until a profile's first launch finished.
const defaultColdStart = time.Second

func (m *Manager) coldStartLocked(ps *poolState) time.Duration {
	if ps.coldStart.n == 0 {
		return defaultColdStart
	}
	return time.Duration(ps.coldStart.v * float64(time.Second))
}

// demandLocked is the demand ps's pool sizes itself for, with slots refills at a time (demandBeforeRefill): the
// one computation behind both the target and the peak_demand it reports.
func (m *Manager) demandLocked(ps *poolState, slots int) int {
	return ps.demand.demandBeforeRefill(m.coldStartLocked(ps), slots, m.cfg.WarmDemandWindow)
}

// noteDemandLocked records a create's arrival, served or not: a create refused at max_sandboxes is demand too.
func (m *Manager) noteDemandLocked(profile string) {
	m.poolLocked(profile).demand.record(m.clock())
}

// noteCreateLocked records how the pool served a create.
func (m *Manager) noteCreateLocked(profile, launchType string) {
	ps := m.poolLocked(profile)
	switch launchType {
	case LaunchWarm:
		ps.hits++
	case LaunchPrestarted:
		ps.prestarted++
	default:
		ps.misses++
	}
}

// noteLaunchLocked records a finished launch's duration: the profile's cold start, the engine's throughput at
// the concurrency it started at, and for a refill its outcome.
func (m *Manager) noteLaunchLocked(e *entry, d time.Duration, err error, now time.Time) (backoff time.Duration) {
	ps := m.poolOfLocked(e.rec) // warm_image.go: a shape's pool, else the profile's
	if err == nil && e.freshLaunch {
		ps.coldStart.add(d.Seconds())
		if !e.activeAt.IsZero() {
			m.tuner.observe(e.launchLevel, now.Sub(e.activeAt))
		}
	}
	if !e.refill || (err != nil && e.activeAt.IsZero()) {
		// A refill that never got a start slot waited out a busy engine; that says nothing about its profile.
		return 0
	}
	if err == nil {
		ps.refills++
		ps.lastRefill = d
		ps.failures = 0
		ps.lastError = ""
		return 0
	}
	ps.refillFails++
	ps.failures++
	ps.lastError = err.Error()
	backoff = warmBackoff(m.cfg.WarmRetryBackoff, ps.failures)
	ps.backoff = now.Add(backoff)
	return backoff
}

// warmLoop keeps every profile's pool at its target: right after a claim (kicked), and on a tick while a pool is
// short because of the refill limits, backing off, or shrinking after demand fell. Ready members are probed now
// and then, which keeps the gateway's connection to each agent open for the first exec after a claim.
func (m *Manager) warmLoop() {
	defer m.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	lastProbe := time.Now()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.warmKick:
		case <-timer.C:
		}
		next := m.refillWarm(m.clock())
		if time.Since(lastProbe) >= warmProbeInterval {
			lastProbe = time.Now()
			m.probeWarm(m.ctx)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// warmProbeInterval is how often ready members are probed: well inside the agent's 10-minute idle timeout for
// keep-alive connections.
const warmProbeInterval = 30 * time.Second

// refillWarm brings each pool toward its target and says when to look again.
func (m *Manager) refillWarm(now time.Time) time.Duration {
	wall := time.Now()
	next := min(time.Second, max(10*time.Millisecond, m.cfgWarmWindow()/4))
	m.mu.Lock()
	if m.closed || !m.started {
		m.mu.Unlock()
		return next
	}
	ready, starting := m.warmCountsLocked()
	held, heldUntil := m.holds.active(wall) // warm_hold.go
	if !heldUntil.IsZero() {
		next = min(next, max(time.Millisecond, heldUntil.Sub(wall)))
	}
	var shrink []*entry
	limit := m.tuner.limit()
	ids := m.profileIDsLocked()
	for _, id := range ids {
		p := m.profiles[id]
		ps := m.poolLocked(p.ID)
		ps.demand.prune(now, m.cfg.WarmDemandWindow)
		ceiling := p.warmCeiling()
		if m.cfg.MaxSandboxes > 0 {
			ceiling = min(ceiling, m.cfg.MaxSandboxes)
		}
		if ceiling <= 0 {
			ps.target = 0
			continue
		}
		ps.target = poolTarget(m.demandLocked(ps, limit), p.WarmPoolSize, ceiling)
		hash := p.Hash()
		if surplus := ready[hash] + starting[hash] - ps.target; surplus > 0 {
			shrink = append(shrink, m.shrinkLocked(hash, surplus)...)
			continue
		}
		if now.Before(ps.backoff) {
			next = min(next, ps.backoff.Sub(now))
			continue
		}
		l := m.limiters[hash]
		if l == nil {
			l = rate.NewLimiter(rate.Limit(m.cfg.WarmRefillPerSecond), max(1, ceiling))
			m.limiters[hash] = l
		}
		l.SetBurst(max(1, ceiling))
		// A claim's refill waits for the claimed sandbox's first call (warm_hold.go).
		m.refillLocked(p, ps, ready[hash], starting[hash], held[hash], limit, l, wall)
	}
	shrink = append(shrink, m.refillImagesLocked(now, wall, ready, starting, held, limit, &next)...) // warm_image.go
	m.mu.Unlock()
	for _, e := range shrink {
		go m.destroyDetached(e, "warm pool shrank")
	}
	return next
}

func (m *Manager) cfgWarmWindow() time.Duration {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cfg.WarmDemandWindow
}

// warmCountsLocked counts warm members by profile hash: ready to claim, and still starting.
func (m *Manager) warmCountsLocked() (ready, starting map[string]int) {
	ready, starting = map[string]int{}, map[string]int{}
	for _, e := range m.entries {
		if !e.rec.Warm || e.deleted || e.rec.Phase == PhaseFailed {
			continue
		}
		if e.rec.Phase == PhaseRunning && !e.launching {
			ready[e.rec.ProfileHash]++
		} else {
			starting[e.rec.ProfileHash]++
		}
	}
	return ready, starting
}

// shrinkLocked detaches up to n ready members of hash, oldest first; the caller destroys them.
func (m *Manager) shrinkLocked(hash string, n int) []*entry {
	var out []*entry
	for n > 0 && len(m.warm[hash]) > 0 {
		e := m.entries[m.warm[hash][0]]
		if e == nil {
			m.warm[hash] = m.warm[hash][1:]
			continue
		}
		m.detachLocked(e)
		out = append(out, e)
		n--
	}
	return out
}

// claimStartingLocked takes the warm member of hash that has been working on the engine longest, or nil: it is
// ready sooner than a cold create started now. A member still queued for a start slot has done nothing yet, and
// it queues behind user creates: a cold create takes its place in line instead.
func (m *Manager) claimStartingLocked(p Profile, unguessable bool) *entry {
	hash := p.Hash()
	var best *entry
	for _, e := range m.entries {
		if e.rec.Warm && !e.deleted && e.launching && e.active && e.rec.ProfileHash == hash && e.rec.Died == nil &&
			(!unguessable || strings.HasPrefix(e.rec.ID, UnguessableIDPrefix)) &&
			(best == nil || e.activeAt.Before(best.activeAt)) {
			best = e
		}
	}
	if best != nil {
		best.refill = false
		best.profile = p
		spec := p
		best.rec.Spec = &spec
	}
	return best
}

// heldLocked counts what max_sandboxes bounds: sandboxes in memory plus removed ones whose container may still be
// on the engine and that no create has taken the place of yet.
func (m *Manager) heldLocked() int { return len(m.entries) + len(m.freeing) }

// probeWarm checks every ready member's agent once. A member that does not answer is replaced; one that does
// leaves a kept-alive connection in the shared transport for its first request after a claim.
func (m *Manager) probeWarm(ctx context.Context) {
	type member struct {
		e    *entry
		addr string
	}
	var all []member
	m.mu.RLock()
	for _, ids := range m.warm {
		for _, id := range ids {
			if e := m.entries[id]; e != nil && e.rec.Phase == PhaseRunning {
				all = append(all, member{e, e.rec.Addr})
			}
		}
	}
	m.mu.RUnlock()
	for _, mb := range all {
		if err := m.probeOnce(ctx, mb.addr); err != nil && ctx.Err() == nil {
			m.mu.Lock()
			stillWarm := mb.e.rec.Warm && !mb.e.deleted
			if stillWarm {
				m.detachLocked(mb.e)
			}
			m.mu.Unlock()
			if stillWarm {
				m.log.Warn("warm sandbox stopped answering; replacing it", "sandbox", mb.e.rec.ID, "error", err)
				go m.destroyDetached(mb.e, "warm member unhealthy")
				kick(m.warmKick)
			}
		}
	}
}

func (m *Manager) probeOnce(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(agentapi.PinAgent(withInternalCall(ctx), addr), 5*time.Second)
	defer cancel()
	base, hc := agentapi.BaseURL(addr, m.http)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	drainClose(resp)
	if resp.StatusCode != http.StatusOK {
		return &Error{Code: CodeEngine, Message: "GET /health answered " + resp.Status}
	}
	return nil
}

// drainClose reads a small reply to its end before closing it, so its connection goes back to the pool.
func drainClose(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// newAgentTransport is the Manager's one connection pool to agents: readiness probes, warm-member probes and
// (through AgentHTTPClient) the API's agent calls share it, so a claimed member's first exec finds the probe's
// connection open and costs one round trip. The agent keeps an idle connection 10 minutes; warm members are
// probed every 30 seconds, so theirs stay open however long they wait. Agents behind a UNIX socket (network none)
// are pooled the same way: each socket is a host of its own in the pool (agentapi.SocketTransport).
func newAgentTransport() *agentapi.SocketTransport {
	return agentapi.NewSocketTransport(&http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     9 * time.Minute,
	})
}

// AgentHTTPClient is an HTTP client on the Manager's shared agent connection pool, without an overall timeout
// (streams use it; each call brings its own context).
func (m *Manager) AgentHTTPClient() *http.Client { return m.agentHTTP }

// claimLocked pops the oldest ready warm member of p's current shape, or returns nil.
func (m *Manager) claimLocked(p Profile, now time.Time, unguessable bool) *entry {
	hash := p.Hash()
	for i := 0; i < len(m.warm[hash]); {
		id := m.warm[hash][i]
		e := m.entries[id]
		if unguessable && e != nil && !strings.HasPrefix(id, UnguessableIDPrefix) {
			i++ // an ordinary id: left for an ordinary create
			continue
		}
		m.warm[hash] = append(m.warm[hash][:i:i], m.warm[hash][i+1:]...)
		if e == nil || e.deleted || !e.rec.Warm || e.rec.Phase != PhaseRunning || e.rec.Died != nil || e.rec.ProfileHash != hash {
			continue
		}
		if now.Sub(e.rec.CreatedAt) > m.cfg.WarmMaxAge {
			m.detachLocked(e)
			go m.destroyDetached(e, "warm member too old")
			continue
		}
		e.profile = p // same hash: only lifecycle settings (idle timeout) can differ
		spec := p
		e.rec.Spec = &spec
		return e
	}
	return nil
}

// warmVictimLocked picks the oldest warm member to make room for a real create, or nil.
func (m *Manager) warmVictimLocked() *entry {
	var victim *entry
	for _, e := range m.entries {
		if e.rec.Warm && !e.deleted && (victim == nil || e.rec.CreatedAt.Before(victim.rec.CreatedAt)) {
			victim = e
		}
	}
	return victim
}

// refillLocked starts the members a pool lacks (its target less those ready, starting and held; after a failure,
// one attempt at a time), within the gateway's sandbox cap, the launch limit and the pool's refill rate l. Records
// and the rate limit keep real time (wall); only the demand and the backoff follow the pool's clock. It returns the
// entries it started, and whether the rate limit stopped it before the pool was full.
func (m *Manager) refillLocked(p Profile, ps *poolState, ready, starting, held, limit int, l *rate.Limiter, wall time.Time) (started []*entry, rateLimited bool) {
	want := ps.target - ready - starting - held
	if ps.failures > 0 {
		want = min(want, 1-starting)
	}
	for ; want > 0; want-- {
		if m.cfg.MaxSandboxes > 0 && m.heldLocked() >= m.cfg.MaxSandboxes {
			break
		}
		if m.launching >= limit {
			break
		}
		if !l.AllowN(wall, 1) {
			return started, true
		}
		e := m.newEntryLockedAfter(p, "", nil, "", nil, true, wall, nil, ps.unguessable)
		e.refill = true
		started = append(started, e)
	}
	return started, false
}
