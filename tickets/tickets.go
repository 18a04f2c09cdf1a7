// Package tickets issues and verifies the short-lived, one-time tokens that let a browser (which cannot set headers
// on a WebSocket or a navigation) reach one route of one sandbox: HS256 JWTs keyed by a shared secret, with the
// sandbox, the route kind, the permission and a nonce in the claims. Verification spends the nonce, so a ticket
// works once; a short session cookie, signed with a key derived from the same secret, covers the page's follow-up
// requests.
package tickets

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"time"
)

// EnvSecret is the environment variable the example configurations read the secret from.
const EnvSecret = "SANDGATE_TICKET_SECRET"

// MinSecretLength is the shortest secret accepted: HS256 keys shorter than the hash's output are guessable offline
// from any ticket.
const MinSecretLength = 32

// DefaultLifetime is how long a ticket is valid when the issuer is not told otherwise.
const DefaultLifetime = 60 * time.Second

// DefaultMaxLifetime caps the lifetime a caller may ask for.
const DefaultMaxLifetime = 10 * time.Minute

// DefaultLeeway absorbs clock skew between the issuer and the verifier.
const DefaultLeeway = 5 * time.Second

// DefaultReplayCacheSize is how many spent nonces are remembered.
const DefaultReplayCacheSize = 100_000

// Audiences keep the two token uses apart: a session cookie is never accepted as a ticket, nor the reverse.
const (
	audienceTicket  = "sandgate-ticket"
	audienceSession = "sandgate-session"
	issuerName      = "sandgate"
)

// Kind is the browser route a ticket opens.
type Kind string

// Route kinds.
const (
	KindApp      Kind = "app"      // a web app served inside the sandbox, through the agent's /proxy/{port}/
	KindVNC      Kind = "vnc"      // the desktop over noVNC / websockify
	KindTerminal Kind = "terminal" // the terminal page and its PTY stream
	KindCDP      Kind = "cdp"      // Chrome DevTools Protocol
	KindPTY      Kind = "pty"      // a raw PTY WebSocket
	KindFiles    Kind = "files"    // file download and upload URLs
	KindMCP      Kind = "mcp"      // the agent's MCP server (Streamable HTTP), for an MCP client that wants one sandbox
)

// Kinds lists every route kind.
var Kinds = []Kind{KindApp, KindVNC, KindTerminal, KindCDP, KindPTY, KindFiles, KindMCP}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

// ParseKind reads a kind's name.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("unknown route kind %q (known: app, vnc, terminal, cdp, pty, files, mcp)", s)
	}
	return k, nil
}

// Permission is what a ticket allows on its route.
type Permission string

// Permissions. Write includes read.
const (
	PermRead  Permission = "read"
	PermWrite Permission = "write"
)

// ParsePermission reads a permission's name; empty means read, the lesser one.
func ParsePermission(s string) (Permission, error) {
	switch Permission(s) {
	case "", PermRead:
		return PermRead, nil
	case PermWrite:
		return PermWrite, nil
	}
	return "", fmt.Errorf("unknown permission %q (read or write)", s)
}

// Allows reports whether holding p grants need.
func (p Permission) Allows(need Permission) bool {
	return p == PermWrite || need == PermRead && p == PermRead
}

// keys holds the signing keys derived from the shared secret.
type keys struct {
	ticket  []byte
	session []byte
}

func newKeys(secret []byte) (keys, error) {
	if len(secret) < MinSecretLength {
		return keys{}, fmt.Errorf("ticket secret is %d bytes; at least %d are required (set %s to a random string, e.g. `openssl rand -hex 32`)",
			len(secret), MinSecretLength, EnvSecret)
	}
	// Tickets are keyed with the secret itself, so any HS256 library holding the secret can mint them; sessions use
	// a derived key, so a cookie cannot stand in for a ticket even if the audience check were skipped.
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("sandgate session cookie v1"))
	return keys{ticket: append([]byte(nil), secret...), session: mac.Sum(nil)}, nil
}
