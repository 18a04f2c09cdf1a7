package agentapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
)

// EnvTokenDigest carries the SHA-256 (hex) of the per-sandbox token instead of the token itself. The gateway sets
// only this: whatever code in the sandbox reads (/proc/1/environ, docker inspect, the agent's environment), a
// digest does not authenticate, and finding a 256-bit random token from its digest is infeasible.
const EnvTokenDigest = "SANDGATE_AGENT_TOKEN_SHA256"

// TokenDigest is the value of EnvTokenDigest for token.
func TokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenCheck verifies presented tokens against a digest. The zero value refuses everything (fail closed).
type TokenCheck struct {
	sum [sha256.Size]byte
	set bool
}

// NewTokenCheck makes a check from a hex digest (EnvTokenDigest).
func NewTokenCheck(digest string) (TokenCheck, error) {
	b, err := hex.DecodeString(strings.TrimSpace(digest))
	if err != nil || len(b) != sha256.Size {
		return TokenCheck{}, errors.New("the agent token digest is not 64 hex digits")
	}
	var c TokenCheck
	copy(c.sum[:], b)
	c.set = true
	return c, nil
}

// TokenCheckFor makes a check for a token known in the clear (tests, the token file).
func TokenCheckFor(token string) TokenCheck {
	if token == "" {
		return TokenCheck{}
	}
	return TokenCheck{sum: sha256.Sum256([]byte(token)), set: true}
}

// Set reports whether the check accepts anything at all.
func (c TokenCheck) Set() bool { return c.set }

// Match reports whether presented is the token, in constant time.
func (c TokenCheck) Match(presented string) bool {
	if !c.set || presented == "" {
		return false
	}
	got := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(got[:], c.sum[:]) == 1
}
