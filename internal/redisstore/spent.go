package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sandgate/sandgate/tickets"
)

// DefaultRetainExtra is how long past exp + leeway a spent nonce is kept. Redis drops nonces by its own clock, the
// verifiers check exp by theirs: the extra covers skew between the two and gateways configured with a larger
// leeway than the one that spent the nonce, up to this much together.
const DefaultRetainExtra = time.Minute

// policyCheckEvery is how often the store re-reads Redis's eviction policy.
const policyCheckEvery = time.Minute

// spendScript spends a nonce atomically. KEYS[1] is the nonce's key, KEYS[2] the subject's sorted set of spent
// nonces scored by the time (ms) until which each is kept. ARGV: retain-until ms, the per-subject bound, the nonce's
// member name. It uses Redis's clock, one clock for the whole fleet. Answers: 0 spent now, 1 spent before, 2 the
// subject is at its bound, 3 already past retention by Redis's clock (a nonce kept for no time protects nothing).
var spendScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep = tonumber(ARGV[1])
if keep <= now then return 3 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then return 2 end
redis.call('SET', KEYS[1], '1', 'PXAT', keep)
redis.call('ZADD', KEYS[2], keep, ARGV[3])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], math.max(keep, tonumber(last[2])))
return 0
`)

// SpentNonces is the fleet's one-time memory of tickets in Redis: a tickets.SpentStore with the promises of the
// in-memory tickets.SpentNonces, shared by every gateway using the same Redis and key prefix. A nonce is a key
// that expires (PXAT) when its ticket can no longer pass any verifier's exp check; each subject has a sorted set of
// its live spent nonces, pruned on every spend, which bounds it; one script does both, so two gateways spending
// the same ticket at once cannot both succeed. Nothing is evicted to make room: a Redis whose maxmemory-policy
// could evict keys is refused (the store answers unavailable) rather than trusted. Safe for concurrent use.
type SpentNonces struct {
	client      redis.Scripter
	config      configGetter
	prefix      string
	size        int
	retainExtra time.Duration

	mu        sync.Mutex
	policyOK  bool
	checkedAt time.Time
}

type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// Client is what SpentNonces and Storage need of a Redis client (*redis.Client has it).
type Client interface {
	redis.Scripter
	configGetter
}

// NewSpentNonces returns the store under prefix (its keys are prefix + "spent:..."), holding up to size live spent
// nonces per subject.
func NewSpentNonces(client Client, prefix string, size int) (*SpentNonces, error) {
	if size <= 0 {
		return nil, fmt.Errorf("replay cache size must be positive, not %d", size)
	}
	return &SpentNonces{client: client, config: client, prefix: prefix, size: size, retainExtra: DefaultRetainExtra}, nil
}

// hashed keeps keys short and of one shape whatever a ticket's claims hold.
func hashed(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// Spend implements tickets.SpentStore.
func (s *SpentNonces) Spend(ctx context.Context, nonce, subject string, exp time.Time, leeway time.Duration) error {
	if err := s.checkPolicy(ctx); err != nil {
		return tickets.Unavailable(err)
	}
	// The subject's hash is a hash tag, so a nonce and its subject's set would share a slot on a cluster proxy.
	set := s.prefix + "spent:{" + hashed(subject) + "}"
	member := hashed(nonce)
	keep := exp.Add(max(leeway, 0) + s.retainExtra).UnixMilli()
	code, err := spendScript.Run(ctx, s.client, []string{set + ":" + member, set}, keep, s.size, member).Int()
	if err != nil {
		return tickets.Unavailable(fmt.Errorf("spending a ticket nonce in redis: %w", err))
	}
	switch code {
	case 0:
		return nil
	case 1:
		return tickets.Replayed("nonce %s already spent (redis)", nonce)
	case 2:
		return tickets.Replayed("subject %q holds %d live spent tickets, the most the replay store keeps for one subject", subject, s.size)
	case 3:
		return &tickets.Error{Reason: tickets.ReasonExpired, Detail: "expired by redis's clock: the gateway's and redis's clocks disagree by more than a minute"}
	}
	return tickets.Unavailable(fmt.Errorf("spending a ticket nonce in redis: unexpected answer %d", code))
}

// ErrEvictingPolicy is the store refusing a Redis that may evict keys under memory pressure: an evicted nonce would
// make its spent ticket usable again.
var ErrEvictingPolicy = errors.New("redis maxmemory-policy may evict spent ticket nonces; set it to noeviction")

// checkPolicy reads maxmemory-policy at most once a minute. Any policy but noeviction is refused (volatile-* would
// evict exactly our keys, which all carry a TTL). A server that does not let us read its config (ACLs, a renamed
// CONFIG) cannot be checked: it is trusted, as docs/kubernetes.md tells the operator. The read happens outside the
// lock: when Redis is down, concurrent spends each fail on their own instead of queueing behind one another.
func (s *SpentNonces) checkPolicy(ctx context.Context) error {
	s.mu.Lock()
	fresh, ok := !s.checkedAt.IsZero() && time.Since(s.checkedAt) < policyCheckEvery, s.policyOK
	s.mu.Unlock()
	if fresh {
		if !ok {
			return ErrEvictingPolicy
		}
		return nil
	}
	m, err := s.config.ConfigGet(ctx, "maxmemory-policy").Result()
	switch {
	case err != nil && isRefusedCommand(err):
		ok = true
	case err != nil:
		return fmt.Errorf("reading redis maxmemory-policy: %w", err)
	default:
		p, found := m["maxmemory-policy"]
		ok = !found || p == "noeviction"
	}
	s.mu.Lock()
	s.policyOK, s.checkedAt = ok, time.Now()
	s.mu.Unlock()
	if !ok {
		return ErrEvictingPolicy
	}
	return nil
}

// isRefusedCommand is Redis saying no to a command (ACL, renamed or disabled), as opposed to not answering.
func isRefusedCommand(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR unknown command")
}

var _ tickets.SpentStore = (*SpentNonces)(nil)
