package sandboxroute

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/tickets"
)

// RequiredPermission is the permission a request needs on its route. Safe methods need read, anything else write.
// Interactive streams (terminal, pty, cdp WebSockets) need write: their bytes drive the sandbox and the gateway
// does not inspect them. A vnc WebSocket needs only read: the agent's bridge filters a read holder's RFB stream to
// view-only (it drops key, pointer and clipboard messages), told the permission in X-Sandgate-Permission. An app WebSocket is an ordinary GET to the app; a read ticket lets a viewer load
// an app that pushes updates (the agent tells the app the permission in X-Sandgate-Permission).
func RequiredPermission(kind tickets.Kind, r *http.Request) tickets.Permission {
	if kind == tickets.KindMCP {
		return tickets.PermWrite // every MCP request, even the GET of its event stream, belongs to a session that drives the sandbox
	}
	if isWebSocket(r) {
		switch kind {
		case tickets.KindTerminal, tickets.KindPTY, tickets.KindCDP:
			return tickets.PermWrite
		}
		return tickets.PermRead
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return tickets.PermRead
	}
	return tickets.PermWrite
}

// RequiredPermissionAt is RequiredPermission for a request at address a, where the path matters too: Chromium's
// discovery endpoints change browser state on a plain GET (/json/new?url opens a tab, /json/close and
// /json/activate close and focus one), so on a CDP route only the read-only discovery endpoints and the DevTools
// frontend's static files are open to a read ticket; every other CDP path needs write. The path is judged as the
// agent will see it: unescaped, with empty and dot segments resolved.
func RequiredPermissionAt(a Address, r *http.Request) tickets.Permission {
	perm := RequiredPermission(a.Kind, r)
	if a.Kind != tickets.KindCDP || perm == tickets.PermWrite {
		return perm
	}
	if !cdpReadOnly(a.Rest) {
		return tickets.PermWrite
	}
	return perm
}

// cdpReadOnlyPaths are Chromium's discovery endpoints that only report.
var cdpReadOnlyPaths = map[string]bool{"/": true, "/json": true, "/json/version": true, "/json/list": true, "/json/protocol": true}

func cdpReadOnly(escapedRest string) bool {
	p, err := url.PathUnescape(escapedRest)
	if err != nil || strings.ContainsAny(p, "\\\x00?#") || strings.Contains(p, "%") {
		return false
	}
	if p == "" {
		p = "/"
	}
	clean := path.Clean(p)
	if clean != strings.TrimSuffix(p, "/") && clean != p {
		return false // dot or empty segments: not a spelling a client needs
	}
	if cdpReadOnlyPaths[clean] {
		return true
	}
	// The DevTools frontend's static files; Chromium serves nothing stateful under /devtools/ over plain HTTP.
	return strings.HasPrefix(clean, "/devtools/") && !strings.Contains(strings.ToLower(clean), "json")
}

// isWebSocket reports whether r opens a WebSocket: an HTTP/1.1 GET with Upgrade, or an extended CONNECT with
// :protocol websocket (HTTP/2 carries it as a header, HTTP/3 in r.Proto), as Caddy's reverse_proxy recognises them.
func isWebSocket(r *http.Request) bool {
	if r.Method == http.MethodConnect {
		return r.ProtoMajor == 2 && r.Header.Get(":protocol") == "websocket" || r.ProtoMajor == 3 && r.Proto == "websocket"
	}
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// AgentRequest is where a browser request goes at the agent.
type AgentRequest struct {
	// EscapedPath is the agent path, escaped as the browser escaped it.
	EscapedPath string
	// RawQuery is the query to send.
	RawQuery string
}

// AgentPath maps an address onto the agent's API:
//
//	app       -> /proxy/{port}{rest}        vnc -> /vnc{rest}        cdp -> /cdp{rest}
//	pty       -> /v1/pty/{pty}/ws           terminal: /ws?pty={pty} -> /v1/pty/{pty}/ws
//	files     -> /v1/files{rest}
//	mcp       -> /mcp                       (/sandboxes/{id}/mcp exactly)
//
// port is the app port to use (the caller resolves path, directive and profile defaults).
func AgentPath(a Address, port int, rawQuery string) (AgentRequest, error) {
	switch a.Kind {
	case tickets.KindApp:
		if port < 1 || port > 65535 {
			return AgentRequest{}, fmt.Errorf("no app port: name one in the URL (/sandboxes/%s/app/{port}/) or set the profile's app_port", a.SandboxID)
		}
		rest := a.Rest
		if rest == "" {
			rest = "/"
		}
		return AgentRequest{EscapedPath: "/proxy/" + strconv.Itoa(port) + rest, RawQuery: rawQuery}, nil
	case tickets.KindVNC:
		return AgentRequest{EscapedPath: "/vnc" + a.Rest, RawQuery: rawQuery}, nil
	case tickets.KindCDP:
		return AgentRequest{EscapedPath: "/cdp" + a.Rest, RawQuery: rawQuery}, nil
	case tickets.KindPTY:
		return AgentRequest{EscapedPath: "/v1/pty/" + a.PTY + "/ws", RawQuery: rawQuery}, nil
	case tickets.KindTerminal:
		if a.Rest != "/ws" {
			return AgentRequest{}, fmt.Errorf("the terminal stream is /sandboxes/%s/terminal/ws?pty={id}", a.SandboxID)
		}
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return AgentRequest{}, fmt.Errorf("reading terminal query: %w", err)
		}
		pty := q.Get("pty")
		if !ValidSandboxID(pty) {
			return AgentRequest{}, fmt.Errorf("the terminal stream needs ?pty={id} naming a PTY session")
		}
		return AgentRequest{EscapedPath: "/v1/pty/" + pty + "/ws", RawQuery: RemoveQueryParam(rawQuery, "pty")}, nil
	case tickets.KindFiles:
		return AgentRequest{EscapedPath: "/v1/files" + strings.TrimSuffix(a.Rest, "/"), RawQuery: rawQuery}, nil
	case tickets.KindMCP:
		if a.Rest != "" && a.Rest != "/" {
			return AgentRequest{}, fmt.Errorf("the sandbox's MCP endpoint is /sandboxes/%s/mcp", a.SandboxID)
		}
		return AgentRequest{EscapedPath: "/mcp", RawQuery: rawQuery}, nil
	}
	return AgentRequest{}, fmt.Errorf("unknown route kind %q", a.Kind)
}

// Apply points r at the agent request, keeping the escaping the client chose.
func (ar AgentRequest) Apply(r *http.Request) error {
	p, err := url.PathUnescape(ar.EscapedPath)
	if err != nil {
		return fmt.Errorf("unescaping agent path: %w", err)
	}
	r.URL.Path = p
	r.URL.RawPath = ""
	if (&url.URL{Path: p}).EscapedPath() != ar.EscapedPath {
		r.URL.RawPath = ar.EscapedPath
	}
	r.URL.RawQuery = ar.RawQuery
	r.RequestURI = r.URL.RequestURI()
	return nil
}

// RemoveQueryParam drops every name=value pair for name from a raw query, leaving the others byte for byte.
func RemoveQueryParam(rawQuery, name string) string {
	if rawQuery == "" {
		return ""
	}
	parts := strings.Split(rawQuery, "&")
	kept := parts[:0]
	for _, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == name || k == name {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "&")
}

// QueryParam returns the first value of name in a raw query, and whether it was there.
func QueryParam(rawQuery, name string) (string, bool) {
	for _, p := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err != nil || uk != name {
			continue
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			return "", true
		}
		return uv, true
	}
	return "", false
}
