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
	// ReplayCacheSize is how many spent nonces are remembered; 0 means DefaultReplayCacheSize.
	ReplayCacheSize int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Verifier checks tickets and session cookies. It remembers spent nonces, so one Verifier must serve every route
// that accepts tickets from the same secret (the Caddy glue keeps it across config reloads). Safe for concurrent use.
type Verifier struct {
	keys   keys
	leeway time.Duration
	now    func() time.Time
	spent  *lru.Cache[string, time.Time] // nonce -> the ticket's expiry

	// floor is the latest expiry of a nonce that was evicted from the full cache while its ticket was still valid.
	// Such a ticket could be replayed without the cache noticing, so every ticket expiring at or before the floor
	// is refused: under a flood of tickets the verifier fails closed instead of open.
	mu    sync.Mutex
	floor time.Time
}

// Expect is what the route being entered requires of a ticket.
type Expect struct {
	SandboxID  string
	Kind       Kind
	Permission Permission
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
	if cfg.ReplayCacheSize == 0 {
		cfg.ReplayCacheSize = DefaultReplayCacheSize
	}
	if cfg.ReplayCacheSize < 0 {
		return nil, fmt.Errorf("replay cache size must be positive, not %d", cfg.ReplayCacheSize)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Verifier{keys: k, leeway: cfg.Leeway, now: cfg.Now}
	v.spent, err = lru.NewWithEvict(cfg.ReplayCacheSize, v.evicted)
	if err != nil {
		return nil, fmt.Errorf("creating replay cache: %w", err)
	}
	return v, nil
}

func (v *Verifier) evicted(_ string, exp time.Time) {
	if !exp.Add(v.leeway).After(v.now()) {
		return // the ticket is dead anyway: forgetting its nonce is harmless
	}
	v.mu.Lock()
	if exp.After(v.floor) {
		v.floor = exp
	}
	v.mu.Unlock()
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
	exp := c.ExpiresAt.Time
	v.mu.Lock()
	floor := v.floor
	v.mu.Unlock()
	if !exp.After(floor) {
		return nil, refuse(ReasonReplayed, "replay cache overflowed while tickets expiring at or before %s were live", floor.Format(time.RFC3339))
	}
	v.dropExpired()
	if seen, _ := v.spent.ContainsOrAdd(c.ID, exp); seen {
		return nil, refuse(ReasonReplayed, "nonce %s already spent", c.ID)
	}
	return c, nil
}

// dropExpired forgets a few of the oldest nonces whose tickets have expired, so spent entries leave with their
// tickets instead of only when the cache is full.
func (v *Verifier) dropExpired() {
	now := v.now()
	for range 4 {
		_, exp, ok := v.spent.GetOldest()
		if !ok || exp.Add(v.leeway).After(now) {
			return
		}
		v.spent.RemoveOldest()
	}
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
