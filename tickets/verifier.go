package tickets

import (
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Secret is shared with the issuer; at least MinSecretLength bytes.
	Secret []byte
	// Leeway absorbs clock skew on exp, nbf and iat; 0 means DefaultLeeway, negative means none.
	Leeway time.Duration
	// Spent remembers spent nonces. Verifiers of one secret must share one: in one process a SpentNonces (the Caddy
	// glue keeps it across config reloads), across a fleet of gateways a shared store (internal/redisstore); nil
	// makes a private SpentNonces holding up to ReplayCacheSize live nonces per subject.
	Spent SpentStore
	// ReplayCacheSize sizes a private Spent (live spent nonces per subject); 0 means DefaultReplayCacheSize.
	ReplayCacheSize int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Verifier checks tickets and session cookies. Safe for concurrent use.
type Verifier struct {
	keys   keys
	leeway time.Duration
	now    func() time.Time
	spent  SpentStore
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
	if mem, ok := cfg.Spent.(*SpentNonces); ok {
		mem.useLeeway(cfg.Leeway)
	}
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
	return v.VerifyContext(context.Background(), token, want)
}

// VerifyContext is Verify with ctx bounding the call to a shared one-time store. The signature and the claims are
// checked first, so nothing unverified ever reaches the store.
func (v *Verifier) VerifyContext(ctx context.Context, token string, want Expect) (*Claims, error) {
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
	if err := v.spent.Spend(ctx, c.ID, c.Subject, c.ExpiresAt.Time, v.leeway); err != nil {
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
