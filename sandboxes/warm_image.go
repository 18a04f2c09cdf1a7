package sandboxes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"time"

	"golang.org/x/time/rate"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Warm pools by image (warm_images): a profile with allowed_images lets each create name its image, so one pool of
// the profile's own image cannot serve them. With warm_images n, the profile keeps a pool per shape its creates
// ask for (the image, with the create's entrypoint and resources: the derived profile, keyed by its Hash), for at
// most n shapes at a time. A shape asked for within warm_demand_window keeps one warm spare, more as its demand
// grows (the profile's warm_pool_max bounds each, as warm.go sizes a profile's pool); a shape not asked for over the
// window decays to zero and is forgotten. A create of a new shape when n are kept evicts the least recently asked
// one and its members, so a tenant asking for many images (or many entrypoints) holds at most
// n × max(1, warm_pool_max) warm sandboxes, and max_sandboxes bounds them with everything else.
//
// A member cannot hold its create's environment, which arrives only with the create: its agent waits in
// agentapi.EnvAwaitClaim form, starting nothing (no entrypoint, no process), and a claim sends it the environment a
// cold sandbox of that create would have started with (POST /v1/claim), on which it replaces itself with a fresh
// agent that starts as a cold one does: HOME seeded, the image's entrypoint run as the sandbox user in the create's
// environment. The same claim is sent on every later start of that container (a stopped sandbox's container keeps
// the waiting form in its environment; bringUp).

// MaxWarmImages bounds a profile's warm_images.
const MaxWarmImages = 64

// imagePool is one shape's warm pool; fields are guarded by Manager.mu.
type imagePool struct {
	base      string       // the profile's id
	req       ImageRequest // the image (canonical), entrypoint and cmd creates ask for
	resources Resources    // the create's resource request
	profile   Profile      // what the members run: the profile derived from req and resources
	lastAsked time.Time
	ps        poolState
	// claimFailures counts members whose agent did not take their claim.
	claimFailures uint64
}

// ImagePoolStats describes one shape's warm pool.
type ImagePoolStats struct {
	Profile string `json:"profile"`
	Image   string `json:"image"`
	// Hash is the shape's key (the derived profile's Hash).
	Hash     string `json:"hash"`
	Target   int    `json:"target"`
	Ready    int    `json:"ready"`
	Starting int    `json:"starting"`
	// Hits are creates served by a member, Misses cold ones; ClaimFailures are members whose agent did not take
	// the claim (the create then went cold and counts as a miss too).
	Hits          uint64    `json:"hits"`
	Misses        uint64    `json:"misses"`
	ClaimFailures uint64    `json:"claim_failures"`
	PeakDemand    int       `json:"peak_demand"`
	LastAsked     time.Time `json:"last_asked"`
}

// WarmImagePools reports every kept shape's pool, sorted by profile, image and hash.
func (m *Manager) WarmImagePools() []ImagePoolStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	ready, starting := m.warmCountsLocked()
	limit := m.tuner.limit()
	var out []ImagePoolStats
	for hash, ip := range m.imagePools {
		out = append(out, ImagePoolStats{Profile: ip.base, Image: ip.profile.Image, Hash: hash, Target: ip.ps.target,
			Ready: ready[hash], Starting: starting[hash], Hits: ip.ps.hits, Misses: ip.ps.misses, ClaimFailures: ip.claimFailures,
			PeakDemand: m.demandLocked(&ip.ps, limit), LastAsked: ip.lastAsked})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Profile != b.Profile {
			return a.Profile < b.Profile
		}
		if a.Image != b.Image {
			return a.Image < b.Image
		}
		return a.Hash < b.Hash
	})
	return out
}

// noteImageDemandLocked records a create of derived (base with req and res) and returns its shape's pool, made (and
// the least recently asked shape evicted) when base keeps warm_images; nil when it keeps none.
func (m *Manager) noteImageDemandLocked(base Profile, req ImageRequest, res Resources, derived Profile, now time.Time) *imagePool {
	if base.WarmImages <= 0 {
		return nil
	}
	hash := derived.Hash()
	ip := m.imagePools[hash]
	if ip == nil {
		var kept []string
		for h, o := range m.imagePools {
			if o.base == base.ID {
				kept = append(kept, h)
			}
		}
		for len(kept) >= base.WarmImages {
			oldest := 0
			for i, h := range kept {
				if m.imagePools[h].lastAsked.Before(m.imagePools[kept[oldest]].lastAsked) {
					oldest = i
				}
			}
			m.dropImagePoolLocked(kept[oldest], "warm image pool evicted by another image")
			kept = append(kept[:oldest], kept[oldest+1:]...)
		}
		req.Image = derived.Image
		ip = &imagePool{base: base.ID, req: req, resources: res, profile: derived}
		m.imagePools[hash] = ip
	}
	ip.lastAsked = now
	ip.ps.demand.record(m.clock())
	return ip
}

// dropImagePoolLocked forgets a shape's pool and removes its members, ready or starting (a starting one's launch
// is cancelled, and its removal waits for the engine step under way).
func (m *Manager) dropImagePoolLocked(hash, why string) {
	delete(m.imagePools, hash)
	for _, e := range m.detachImageMembersLocked(hash) {
		go m.destroyDetached(e, why)
	}
}

// detachImageMembersLocked detaches every member of a shape's pool; the caller destroys them.
func (m *Manager) detachImageMembersLocked(hash string) []*entry {
	var out []*entry
	for _, e := range m.entries {
		if e.rec.Warm && e.rec.ImageWarm && !e.deleted && e.rec.ProfileHash == hash {
			out = append(out, e)
		}
	}
	for _, e := range out {
		m.detachLocked(e)
	}
	return out
}

// warmStaleLocked reports whether a warm member no longer fits a pool: its profile is gone or changed shape, or
// its image's pool was dropped.
func (m *Manager) warmStaleLocked(rec Record) bool {
	p, ok := m.profiles[rec.Profile]
	if !ok {
		return true
	}
	if rec.ImageWarm {
		ip := m.imagePools[rec.ProfileHash]
		return ip == nil || ip.base != rec.Profile || p.WarmImages <= 0
	}
	return p.Hash() != rec.ProfileHash || p.warmCeiling() == 0
}

// refillImagesLocked brings each shape's pool toward its target, as refillWarm does a profile's; it returns the
// members to destroy and may shorten next.
func (m *Manager) refillImagesLocked(now, wall time.Time, ready, starting, held map[string]int, limit int, next *time.Duration) []*entry {
	var shrink []*entry
	hashes := make([]string, 0, len(m.imagePools))
	for h := range m.imagePools {
		hashes = append(hashes, h)
	}
	sort.Strings(hashes)
	for _, hash := range hashes {
		ip := m.imagePools[hash]
		base, ok := m.profiles[ip.base]
		if ok && base.WarmImages > 0 {
			// A reload may have changed the profile: the shape is derived again, and a changed one starts over.
			if d, err := deriveImageProfile(base, ip.req, ip.resources); err != nil || d.Hash() != hash {
				ok = false
			}
		}
		ip.ps.demand.prune(now, m.cfg.WarmDemandWindow)
		if !ok || len(ip.ps.demand.arrivals) == 0 {
			// Not asked for over the window (or no longer allowed): the pool decays to zero and is forgotten.
			ip.ps.target = 0
			delete(m.imagePools, hash)
			shrink = append(shrink, m.detachImageMembersLocked(hash)...)
			continue
		}
		ceiling := max(1, base.WarmPoolMax)
		if m.cfg.MaxSandboxes > 0 {
			ceiling = min(ceiling, m.cfg.MaxSandboxes)
		}
		ip.ps.target = poolTarget(m.demandLocked(&ip.ps, limit), 1, ceiling)
		if surplus := ready[hash] + starting[hash] - ip.ps.target; surplus > 0 {
			shrink = append(shrink, m.shrinkLocked(hash, surplus)...)
			continue
		}
		if now.Before(ip.ps.backoff) {
			*next = min(*next, ip.ps.backoff.Sub(now))
			continue
		}
		// One limiter for all of a profile's shapes: however many images its creates name, its refills start at
		// warm_refill_rate at most.
		lkey := "images\x00" + ip.base
		l := m.limiters[lkey]
		if l == nil {
			l = rate.NewLimiter(rate.Limit(m.cfg.WarmRefillPerSecond), max(1, base.WarmImages))
			m.limiters[lkey] = l
		}
		started, rateLimited := m.refillLocked(ip.profile, &ip.ps, ready[hash], starting[hash], held[hash], limit, l, wall)
		for _, e := range started {
			e.rec.ImageWarm = true
		}
		if rateLimited {
			*next = min(*next, 50*time.Millisecond)
		}
	}
	return shrink
}

// deriveImageProfile is the profile a create of req with res runs under base, as Create derives it.
func deriveImageProfile(base Profile, req ImageRequest, res Resources) (Profile, error) {
	p, err := base.WithImage(req)
	if err != nil {
		return p, err
	}
	if res != (Resources{}) {
		return p.WithResources(res)
	}
	return p, nil
}

// poolOfLocked is the pool whose figures a sandbox's launches count toward: its shape's, else its profile's.
func (m *Manager) poolOfLocked(rec Record) *poolState {
	if ip := m.imagePools[rec.ProfileHash]; ip != nil && ip.base == rec.Profile {
		return &ip.ps
	}
	return m.poolLocked(rec.Profile)
}

// claimEnv is what a claim sends a waiting agent: the changes from the environment its container was made with (a
// warm member's: no create environment, the waiting form) to the one a cold container of rec would have.
func (m *Manager) claimEnv(rec Record, p Profile) agentapi.ClaimRequest {
	warm := rec
	warm.Warm, warm.ImageWarm, warm.Env = true, true, nil
	from, to := m.specFor(warm, p).Env, m.specFor(rec, p).Env
	var c agentapi.ClaimRequest
	for k, v := range to {
		if old, ok := from[k]; !ok || old != v {
			if c.Set == nil {
				c.Set = map[string]string{}
			}
			c.Set[k] = v
		}
	}
	for k := range from {
		if _, ok := to[k]; !ok {
			c.Unset = append(c.Unset, k)
		}
	}
	sort.Strings(c.Unset)
	return c
}

// deliverClaim sends a waiting agent at addr its create's environment and waits until the fresh agent it becomes
// answers /health.
func (m *Manager) deliverClaim(ctx context.Context, rec Record, p Profile, addr string, timeout time.Duration) error {
	body, err := json.Marshal(m.claimEnv(rec, p))
	if err != nil {
		return fmt.Errorf("encoding the claim: %w", err)
	}
	cctx, cancel := context.WithTimeout(agentapi.PinAgent(withInternalCall(ctx), addr), 10*time.Second)
	defer cancel()
	base, hc := agentapi.BaseURL(addr, m.http)
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, base+agentapi.ClaimPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(agentapi.TokenHeader, rec.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("claiming sandbox %s: %w", rec.ID, err)
	}
	drainClose(resp)
	if resp.StatusCode != http.StatusNoContent {
		return &Error{Code: CodeEngine, Message: fmt.Sprintf("claiming sandbox %s: the agent answered %s", rec.ID, resp.Status)}
	}
	if err := m.waitHealthy(ctx, addr, timeout); err != nil {
		return fmt.Errorf("sandbox %s after its claim: %w", rec.ID, err)
	}
	return nil
}

// claimImageLocked takes a ready member of derived's shape for a create, or nil. Only ready members: a starting
// one would need its claim after its launch, and a cold create is as quick.
func (m *Manager) claimImageLocked(ip *imagePool, derived Profile, now time.Time, unguessable bool) *entry {
	if ip == nil {
		return nil
	}
	e := m.claimLocked(derived, now, unguessable)
	if e == nil {
		ip.ps.misses++
		return nil
	}
	return e // counted once its agent took the claim (noteImageClaimLocked)
}

// noteImageClaimLocked counts a claim's outcome in its shape's pool.
func (m *Manager) noteImageClaimLocked(hash string, ok bool) {
	ip := m.imagePools[hash]
	if ip == nil {
		return
	}
	if ok {
		ip.ps.hits++
	} else {
		ip.claimFailures++
		ip.ps.misses++ // the create goes cold
	}
}

// cloneEnv copies a create's environment into its record.
func cloneEnv(env map[string]string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	return maps.Clone(env)
}
