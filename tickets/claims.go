package tickets

import "github.com/golang-jwt/jwt/v5"

// Claims is what a ticket or a session cookie says.
type Claims struct {
	// SandboxID names the one sandbox the token opens.
	SandboxID string `json:"sid"`
	// Kind is the one route kind the token opens.
	Kind Kind `json:"kind"`
	// Permission is read or write.
	Permission Permission `json:"perm"`
	// Registered claims: jti (the one-time nonce), exp, iat, nbf, aud, iss, and sub (who asked for the ticket,
	// for logs).
	jwt.RegisteredClaims
}
