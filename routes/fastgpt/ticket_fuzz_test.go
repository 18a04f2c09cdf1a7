package fastgpt

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzParseTicket: whatever ticket a browser presents, the check never panics, and an accepted one is an HS256
// token under this secret only (the same bytes are refused under another), unexpired, with channel and permission.
func FuzzParseTicket(f *testing.F) {
	now := time.Now()
	f.Add(signTicket(f, testSecret, testClaims(channelTerminal, "write"), now.Add(time.Hour)))
	f.Add(signTicket(f, testSecret, testClaims("fs", "read"), now.Add(-time.Hour)))
	f.Add(signTicket(f, "another-secret-0123456789abcdef0123", testClaims("fs", "read"), now))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"channel": "fs", "permission": "read",
		"exp": now.Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	f.Add(none)
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"channel": "fs", "permission": "read",
		"exp": now.Add(time.Hour).Unix()}).SignedString([]byte(testSecret))
	f.Add(hs512)
	for _, s := range []string{"", ".", "..", "a.b.c", "eyJhbGciOiJIUzI1NiJ9..", strings.Repeat("A", 5000)} {
		f.Add(s)
	}
	secret, other := []byte(testSecret), []byte(testSecret+"-other")
	f.Fuzz(func(t *testing.T, ticket string) {
		c, err := parseTicket(secret, ticket)
		if err != nil {
			return
		}
		if c.Channel == "" || c.Permission == "" || c.ExpiresAt == nil || time.Until(c.ExpiresAt.Time) < -ticketLeeway-time.Minute {
			t.Fatalf("%q accepted as %+v", ticket, c)
		}
		if _, err := parseTicket(other, ticket); err == nil {
			t.Fatalf("%q accepted under two secrets", ticket)
		}
		head, _, _ := strings.Cut(ticket, ".")
		raw, err := base64.RawURLEncoding.DecodeString(head)
		var h struct{ Alg string }
		if err != nil || json.Unmarshal(raw, &h) != nil || h.Alg != "HS256" {
			t.Fatalf("%q accepted with header %q", ticket, raw)
		}
	})
}
