package pages

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
)

// newNonce returns a fresh CSP nonce. xterm.js creates <style> elements for its measurements and theme; our
// terminal script stamps this nonce on them, so the policy still refuses every inline style an attacker could
// inject. Scripts never get a nonce: they all come from 'self'.
func newNonce() (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

// contentSecurityPolicy is the policy of every page. connect-src names wss: because a WebSocket to the page's own
// origin is wss://host, which older engines do not count as 'self'.
func contentSecurityPolicy(nonce string) string {
	style := "style-src 'self'"
	if nonce != "" {
		style += " 'nonce-" + nonce + "'"
	}
	return "default-src 'none'; script-src 'self'; " + style + "; img-src 'self' data: blob:; font-src 'self'; " +
		"connect-src 'self' wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
}

// setSecurityHeaders sets what every response of this package carries, pages and assets alike.
func setSecurityHeaders(h http.Header, nonce string) {
	h.Set("Content-Security-Policy", contentSecurityPolicy(nonce))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}
