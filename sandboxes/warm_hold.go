package sandboxes

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// A claim kicks a refill, and a refill is the heaviest thing a gateway does: the engine creates a volume and a
// container and starts it, on the same CPUs and disk as the sandbox just handed out, at the very moment its user
// sends the first command. Measured on 2 cores, a first exec with a refill under way took about 1.5x one without.
// So the refill a claim triggers waits until the claimed sandbox's first agent call is over, or warm_refill_hold
// passes, whichever comes first: the user's first call never competes with the pool's own upkeep, and a pool is
// refilled at most warm_refill_hold later than before. A hold defers only the refill its own claim triggered:
// refills the demand-following target asks for beyond that, and every other pool's, go ahead, so a steady stream
// of claims never starves the pool.
//
// The first call is seen in the Manager's agent transport (the API's agent calls, the pages' and the console's):
// a call through any other route (the edge's reverse proxy) ends the hold by its bound alone. The Manager's own
// requests (readiness and warm-member probes) do not count as a first call.

// DefaultWarmRefillHold is how long at most a claim's refill waits for the claimed sandbox's first call.
const DefaultWarmRefillHold = 500 * time.Millisecond

// refillHold is one claim's deferred refill.
type refillHold struct {
	id    string // the claimed sandbox
	hash  string // its profile hash: the pool whose refill waits
	until time.Time
	// inCall is set once the first call started: a second call at the same time does not end the hold.
	inCall bool
}

// refillHolds are the claims whose refill waits, by the agent host their first call goes to (the request's
// URL host on the Manager's transport). Safe for concurrent use; the agent transport looks them up on every
// request, so an empty set costs one atomic load.
type refillHolds struct {
	n      atomic.Int32
	mu     sync.Mutex
	byHost map[string]*refillHold
}

// add holds a refill of hash until the first call to host ends or until passes. A host held already (an agent
// address the engine gave again) is replaced.
func (h *refillHolds) add(host, id, hash string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byHost == nil {
		h.byHost = map[string]*refillHold{}
	}
	h.byHost[host] = &refillHold{id: id, hash: hash, until: until}
	h.n.Store(int32(len(h.byHost)))
}

// begin marks the start of a call to host. If it is the first call of a held claim, the returned function ends
// the hold (once); otherwise it returns nil.
func (h *refillHolds) begin(host string) (end func() bool) {
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hold := h.byHost[host]
	if hold == nil || hold.inCall {
		return nil
	}
	hold.inCall = true
	return func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.byHost[host] != hold {
			return false // expired, dropped, or replaced meanwhile
		}
		delete(h.byHost, host)
		h.n.Store(int32(len(h.byHost)))
		return true
	}
}

// drop ends the hold of sandbox id, if any (it was deleted: its refill need not wait for a call that never comes).
func (h *refillHolds) drop(id string) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for host, hold := range h.byHost {
		if hold.id == id {
			delete(h.byHost, host)
		}
	}
	h.n.Store(int32(len(h.byHost)))
}

// active forgets the holds whose bound passed at now and counts the others by profile hash; next is the soonest
// bound among them (zero if none), when the pool must look again.
func (h *refillHolds) active(now time.Time) (byHash map[string]int, next time.Time) {
	if h.n.Load() == 0 {
		return nil, time.Time{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	byHash = map[string]int{}
	for host, hold := range h.byHost {
		if !now.Before(hold.until) {
			delete(h.byHost, host)
			continue
		}
		byHash[hold.hash]++
		if next.IsZero() || hold.until.Before(next) {
			next = hold.until
		}
	}
	h.n.Store(int32(len(h.byHost)))
	return byHash, next
}

// holdRefillLocked defers the refill the claim of e triggers (called under m.mu, with the claimed entry).
func (m *Manager) holdRefillLocked(e *entry, now time.Time) {
	if m.cfg.WarmRefillHold <= 0 || e.rec.Addr == "" {
		return
	}
	m.holds.add(agentHost(e.rec.Addr), e.rec.ID, e.rec.ProfileHash, now.Add(m.cfg.WarmRefillHold))
}

// agentHost is the URL host of requests to the agent at addr on the Manager's transport: host:port, or a
// socket's own host name (agentapi.BaseURL).
func agentHost(addr string) string {
	base, _ := agentapi.BaseURL(addr, &http.Client{Transport: &agentapi.SocketTransport{}})
	return strings.TrimPrefix(base, "http://")
}

// observeAgentCall is the agent transport's Observe: the first call to a held claim ends its hold when it is
// over, and the pool refills at once.
func (m *Manager) observeAgentCall(req *http.Request) func() {
	if internalCall(req.Context()) {
		return nil
	}
	end := m.holds.begin(req.URL.Host)
	if end == nil {
		return nil
	}
	return func() {
		if end() {
			kick(m.warmKick)
		}
	}
}

type internalCallKey struct{}

// withInternalCall marks ctx as the Manager's own request to an agent (a probe), which is no user's first call.
func withInternalCall(ctx context.Context) context.Context {
	return context.WithValue(ctx, internalCallKey{}, true)
}

func internalCall(ctx context.Context) bool {
	v, _ := ctx.Value(internalCallKey{}).(bool)
	return v
}
