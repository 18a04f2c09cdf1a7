package browser

import (
	"net/http"
	"net/url"
	"strings"
)

// external is where the caller sees the agent's /cdp: the scheme, host and path prefix a gateway in front reports in
// X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-Prefix. Chromium only knows itself as 127.0.0.1:9222, so every
// URL it hands out is rewritten to this, or a client behind a proxy would dial localhost and fail.
type external struct {
	secure bool
	host   string
	// prefix replaces "/cdp": "/cdp" itself without a gateway, "/sandboxes/<id>/cdp" behind one.
	prefix string
}

func externalFrom(r *http.Request) external {
	e := external{host: r.Host, prefix: "/cdp", secure: r.TLS != nil}
	if p := firstValue(r.Header.Get("X-Forwarded-Proto")); p != "" {
		e.secure = strings.EqualFold(p, "https") || strings.EqualFold(p, "wss")
	}
	if h := firstValue(r.Header.Get("X-Forwarded-Host")); validHost(h) {
		e.host = h
	}
	if p := strings.TrimRight(firstValue(r.Header.Get("X-Forwarded-Prefix")), "/"); validPrefix(p) {
		e.prefix = p
	}
	return e
}

// firstValue takes the first of a comma-separated list (the client-most hop).
func firstValue(v string) string {
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]_", c)) {
			return false
		}
	}
	return true
}

func validPrefix(p string) bool {
	if p == "" || p[0] != '/' || len(p) > 1024 || strings.HasPrefix(p, "//") {
		return false
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f || strings.ContainsRune("?#\\\"'<>", c) {
			return false
		}
	}
	return true
}

func (e external) wsScheme() string {
	if e.secure {
		return "wss"
	}
	return "ws"
}

func (e external) httpScheme() string {
	if e.secure {
		return "https"
	}
	return "http"
}

// httpURL is the endpoint a CDP client is given (Playwright's connectOverCDP, Puppeteer's browserURL).
func (e external) httpURL() string { return e.httpScheme() + "://" + e.host + e.prefix }

// webSocketURL rewrites a DevTools WebSocket URL (ws://127.0.0.1:9222/devtools/page/ID).
func (e external) webSocketURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || !strings.HasPrefix(u.Path, "/devtools/") {
		return raw
	}
	return e.wsScheme() + "://" + e.host + e.prefix + u.EscapedPath()
}

// frontendURL rewrites devtoolsFrontendUrl: the ws= (or wss=) parameter names host and path of the page's socket
// without a scheme, and a relative frontend path is served by Chromium under our prefix.
func (e external) frontendURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	parts := strings.Split(u.RawQuery, "&")
	for i, p := range parts {
		key, val, ok := strings.Cut(p, "=")
		if !ok || (key != "ws" && key != "wss") {
			continue
		}
		v, err := url.QueryUnescape(val)
		if err != nil {
			continue
		}
		if j := strings.Index(v, "/devtools/"); j >= 0 {
			// Kept unescaped, as Chromium writes it, so the frontend reads it back the same way.
			parts[i] = e.wsScheme() + "=" + e.host + e.prefix + v[j:]
		}
	}
	u.RawQuery = strings.Join(parts, "&")
	if u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/") {
		return e.httpURL() + u.String()
	}
	return u.String()
}

// rewriteTargets rewrites the URL fields of a /json/version object or a /json/list array in place.
func (e external) rewriteTargets(v any) {
	switch t := v.(type) {
	case []any:
		for _, item := range t {
			e.rewriteTargets(item)
		}
	case map[string]any:
		if s, ok := t["webSocketDebuggerUrl"].(string); ok {
			t["webSocketDebuggerUrl"] = e.webSocketURL(s)
		}
		if s, ok := t["devtoolsFrontendUrl"].(string); ok {
			t["devtoolsFrontendUrl"] = e.frontendURL(s)
		}
	}
}
