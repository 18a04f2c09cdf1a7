package tickets

import (
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultSessionLifetime is how long a session cookie lasts: long enough for a page to load its assets and open
// its WebSocket, short enough that a stolen cookie is soon useless.
const DefaultSessionLifetime = 10 * time.Minute

// NewSession mints a session token carrying an accepted ticket's sandbox, kind and permission. Unlike a ticket it
// may be presented many times until it expires; it is meant for an HttpOnly cookie scoped to the sandbox's route.
func (v *Verifier) NewSession(from *Claims, lifetime time.Duration) (string, time.Time, error) {
	if lifetime <= 0 {
		lifetime = DefaultSessionLifetime
	}
	now := v.now()
	exp := now.Add(lifetime)
	c := Claims{
		SandboxID:  from.SandboxID,
		Kind:       from.Kind,
		Permission: from.Permission,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuerName,
			Subject:   from.Subject,
			Audience:  jwt.ClaimStrings{audienceSession},
			ExpiresAt: jwt.NewNumericDate(exp),
			IssuedAt:  jwt.NewNumericDate(now),
		},
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(v.keys.session)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("signing session: %w", err)
	}
	return tok, exp, nil
}

// VerifySession checks a session token against the route. Sessions are not one-time.
func (v *Verifier) VerifySession(token string, want Expect) (*Claims, error) {
	c, err := v.parse(token, v.keys.session, audienceSession)
	if err != nil {
		return nil, err
	}
	if err := check(c, want); err != nil {
		return nil, err
	}
	return c, nil
}
