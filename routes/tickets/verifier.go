package tickets

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Secret is shared with the issuer; at least MinSecretLength bytes.
	Secret []byte
	// Leeway absorbs clock skew on exp, nbf and iat; 0 means DefaultLeeway, negative means none.
	Leeway time.Duration
	// Spent remembers spent nonces. Verifiers of one secret must share one (the Caddy glue keeps it across config
	// reloads); nil makes a private one of ReplayCacheSize entries.
	Spent *SpentNonces
	// ReplayCacheSize sizes a private Spent; 0 means DefaultReplayCacheSize.
	ReplayCacheSize int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Verifier checks tickets and session cookies. Safe for concurrent use.
type Verifier struct {
	keys   keys
	leeway time.Duration
	now    func() time.Time
	spent  *SpentNonces
}

// SpentNonces is the one-time memory of tickets: an LRU of spent nonces with their tickets' expiry. Safe for
// concurrent use.
type SpentNonces struct {
	cache *lru.Cache[string, time.Time] // nonce -> the ticket's expiry

	// floor is the latest expiry of a nonce that was evicted from the full cache while its ticket was still valid.
	// Such a ticket could be replayed without the cache noticing, so every ticket expiring at or before the floor
	// is refused: under a flood of tickets (or a shrink) the cache fails closed instead of open.
	mu    sync.Mutex
	floor time.Time
	grace time.Duration // the largest leeway of the verifiers using the store
	size  int
	now   func() time.Time
}

// NewSpentNonces returns an empty store for size nonces; now is the clock (nil: time.Now).
func NewSpentNonces(size int, now func() time.Time) (*SpentNonces, error) {
	if size <= 0 {
		return nil, fmt.Errorf("replay cache size must be positive, not %d", size)
	}
	if now == nil {
		now = time.Now
	}
	s := &SpentNonces{now: now, size: size}
	var err error
	if s.cache, err = lru.NewWithEvict(size, s.evicted); err != nil {
		return nil, fmt.Errorf("creating replay cache: %w", err)
	}
	return s, nil
}

// Resize changes how many nonces are remembered. Shrinking evicts the oldest, raising the floor if they were live.
func (s *SpentNonces) Resize(size int) error {
	if size <= 0 {
		return fmt.Errorf("replay cache size must be positive, not %d", size)
	}
	s.cache.Resize(size)
	s.mu.Lock()
	s.size = size
	s.mu.Unlock()
	return nil
}

// Size is how many nonces the store can remember.
func (s *SpentNonces) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Len is how many nonces are remembered.
func (s *SpentNonces) Len() int { return s.cache.Len() }

func (s *SpentNonces) evicted(_ string, exp time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !exp.Add(s.grace).After(s.now()) {
		return // the ticket is dead anyway: forgetting its nonce is harmless
	}
	if exp.After(s.floor) {
		s.floor = exp
	}
}

func (s *SpentNonces) useLeeway(leeway time.Duration) {
	s.mu.Lock()
	s.grace = max(s.grace, leeway)
	s.mu.Unlock()
}

// spend records nonce as spent; it reports a replay, or a ticket the store cannot prove unspent.
func (s *SpentNonces) spend(nonce string, exp time.Time, leeway time.Duration) error {
	s.mu.Lock()
	floor := s.floor
	s.mu.Unlock()
	if !exp.After(floor) {
		return refuse(ReasonReplayed, "replay cache overflowed while tickets expiring at or before %s were live", floor.Format(time.RFC3339))
	}
	// Forget a few of the oldest nonces whose tickets have expired (with the leeway), so entries leave with their
	// tickets instead of only when the cache is full. An expired ticket fails its exp check before reaching here.
	now := s.now()
	for range 4 {
		_, e, ok := s.cache.GetOldest()
		if !ok || e.Add(leeway).After(now) {
			break
		}
		s.cache.RemoveOldest()
	}
	if seen, _ := s.cache.ContainsOrAdd(nonce, exp); seen {
		return refuse(ReasonReplayed, "nonce %s already spent", nonce)
	}
	return nil
}

// NewVerifier checks the configuration and returns a Verifier.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	k, err := newKeys(cfg.Secret)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultLeeway
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Spent == nil {
		if cfg.ReplayCacheSize == 0 {
			cfg.ReplayCacheSize = DefaultReplayCacheSize
		}
		if cfg.Spent, err = NewSpentNonces(cfg.ReplayCacheSize, cfg.Now); err != nil {
			return nil, err
		}
	}
	cfg.Spent.useLeeway(cfg.Leeway)
	return &Verifier{keys: k, leeway: cfg.Leeway, now: cfg.Now, spent: cfg.Spent}, nil
}

// Expect is what the route being entered requires of a ticket.
type Expect struct {
	SandboxID  string
	Kind       Kind
	Permission Permission
}

// Verify checks a ticket against the route and spends its nonce. A ticket passes once.
func (v *Verifier) Verify(token string, want Expect) (*Claims, error) {
	c, err := v.parse(token, v.keys.ticket, audienceTicket)
	if err != nil {
		return nil, err
	}
	if err := check(c, want); err != nil {
		return nil, err
	}
	if c.ID == "" {
		return nil, refuse(ReasonMalformed, "no jti nonce")
	}
	if err := v.spent.spend(c.ID, c.ExpiresAt.Time, v.leeway); err != nil {
		return nil, err
	}
	return c, nil
}

func (v *Verifier) parse(token string, key []byte, audience string) (*Claims, error) {
	if token == "" {
		return nil, refuse(ReasonMissing, "empty token")
	}
	c := new(Claims)
	_, err := jwt.ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithAudience(audience),
		jwt.WithIssuer(issuerName),
		jwt.WithLeeway(v.leeway),
		jwt.WithTimeFunc(v.now),
		jwt.WithStrictDecoding(),
	)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenMalformed), errors.Is(err, jwt.ErrTokenRequiredClaimMissing),
		errors.Is(err, jwt.ErrInvalidType):
		return nil, refuse(ReasonMalformed, "%v", err)
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenNotValidYet),
		errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return nil, refuse(ReasonExpired, "%v", err)
	default:
		// Signature, algorithm, audience, issuer: the token was not made by us for this use.
		return nil, refuse(ReasonForged, "%v", err)
	}
	if c.SandboxID == "" || !c.Kind.Valid() {
		return nil, refuse(ReasonMalformed, "sid or kind missing or unknown")
	}
	if _, err := ParsePermission(string(c.Permission)); err != nil || c.Permission == "" {
		return nil, refuse(ReasonMalformed, "perm missing or unknown")
	}
	return c, nil
}

func check(c *Claims, want Expect) error {
	if subtle.ConstantTimeCompare([]byte(c.SandboxID), []byte(want.SandboxID)) != 1 {
		return refuse(ReasonWrongSandbox, "ticket for sandbox %q used on %q", c.SandboxID, want.SandboxID)
	}
	if subtle.ConstantTimeCompare([]byte(c.Kind), []byte(want.Kind)) != 1 {
		return refuse(ReasonWrongKind, "ticket for %s used on %s", c.Kind, want.Kind)
	}
	need := want.Permission
	if need == "" {
		need = PermRead
	}
	if !c.Permission.Allows(need) {
		return refuse(ReasonReadOnly, "%s ticket used for a %s request", c.Permission, need)
	}
	return nil
}
