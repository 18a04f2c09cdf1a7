package tickets

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// IssuerConfig configures an Issuer.
type IssuerConfig struct {
	// Secret is shared with the verifiers; at least MinSecretLength bytes.
	Secret []byte
	// DefaultLifetime applies when a request names none; 0 means DefaultLifetime.
	DefaultLifetime time.Duration
	// MaxLifetime caps requested lifetimes; 0 means DefaultMaxLifetime.
	MaxLifetime time.Duration
	// MintPerMinute and MintBurst bound how fast one subject mints (a token bucket per subject); 0 means
	// DefaultMintPerMinute and DefaultMintBurst, negative means unlimited.
	MintPerMinute int
	MintBurst     int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Issuer mints tickets. Its only state is the per-subject mint budget; it is safe for concurrent use.
type Issuer struct {
	keys  keys
	cfg   IssuerConfig
	limit *mintLimiter // nil: unlimited
}

// NewIssuer checks the configuration and returns an Issuer.
func NewIssuer(cfg IssuerConfig) (*Issuer, error) {
	k, err := newKeys(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.DefaultLifetime <= 0 {
		cfg.DefaultLifetime = DefaultLifetime
	}
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.DefaultLifetime > cfg.MaxLifetime {
		return nil, fmt.Errorf("default ticket lifetime %s exceeds the maximum %s", cfg.DefaultLifetime, cfg.MaxLifetime)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	iss := &Issuer{keys: k, cfg: cfg}
	if cfg.MintPerMinute >= 0 {
		if cfg.MintPerMinute == 0 {
			cfg.MintPerMinute = DefaultMintPerMinute
		}
		if cfg.MintBurst <= 0 {
			cfg.MintBurst = DefaultMintBurst
		}
		iss.limit = newMintLimiter(cfg.MintPerMinute, cfg.MintBurst)
	}
	return iss, nil
}

// IssueRequest asks for a ticket.
type IssueRequest struct {
	SandboxID  string
	Kind       Kind
	Permission Permission // empty means read
	// Lifetime is how long the ticket is valid; 0 means the issuer's default. It is capped by the issuer's maximum.
	Lifetime time.Duration
	// Subject names who asked (an API key's owner), for the verifier's logs.
	Subject string
}

// Ticket is an issued ticket.
type Ticket struct {
	// Token is the compact JWT to put in `?ticket=` or `Authorization: Bearer`.
	Token string `json:"ticket"`
	// ID is the one-time nonce (jti).
	ID        string    `json:"ticket_id"`
	ExpiresAt time.Time `json:"expires_at"`
	// ExpiresIn is the lifetime in whole seconds, as token endpoints usually report it.
	ExpiresIn int `json:"expires_in"`
}

// Issue mints a one-time ticket for one route kind of one sandbox. A subject minting faster than its budget gets a
// *RateLimitedError.
func (i *Issuer) Issue(req IssueRequest) (Ticket, error) {
	if req.SandboxID == "" {
		return Ticket{}, fmt.Errorf("issuing ticket: sandbox id is required")
	}
	if !req.Kind.Valid() {
		return Ticket{}, fmt.Errorf("issuing ticket: %w", errUnknownKind(req.Kind))
	}
	perm, err := ParsePermission(string(req.Permission))
	if err != nil {
		return Ticket{}, fmt.Errorf("issuing ticket: %w", err)
	}
	life := req.Lifetime
	switch {
	case life < 0:
		return Ticket{}, fmt.Errorf("issuing ticket: negative lifetime %s", life)
	case life == 0:
		life = i.cfg.DefaultLifetime
	case life > i.cfg.MaxLifetime:
		life = i.cfg.MaxLifetime
	}
	now := i.cfg.Now()
	if i.limit != nil {
		if err := i.limit.take(req.Subject, now); err != nil {
			return Ticket{}, err
		}
	}
	nonce, err := newNonce()
	if err != nil {
		return Ticket{}, fmt.Errorf("issuing ticket: %w", err)
	}
	exp := now.Add(life)
	claims := Claims{
		SandboxID:  req.SandboxID,
		Kind:       req.Kind,
		Permission: perm,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuerName,
			Subject:   req.Subject,
			Audience:  jwt.ClaimStrings{audienceTicket},
			ExpiresAt: jwt.NewNumericDate(exp),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        nonce,
		},
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(i.keys.ticket)
	if err != nil {
		return Ticket{}, fmt.Errorf("signing ticket: %w", err)
	}
	return Ticket{Token: tok, ID: nonce, ExpiresAt: exp.Truncate(time.Second), ExpiresIn: int(life / time.Second)}, nil
}

func errUnknownKind(k Kind) error {
	_, err := ParseKind(string(k))
	return err
}

func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
