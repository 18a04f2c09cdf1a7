package sandboxroute

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/tickets"
)

// FuzzParsePath: whatever path a browser or tenant page requests, the parse never panics, and an accepted address
// is the path itself split in two (Prefix+Rest, nothing dropped or added), names a valid sandbox id, a port only
// for app routes and only from 1 to 65535, a valid PTY for pty routes, a cookie path the request lies under, and an
// agent path beneath the kind's root at the agent.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/sandboxes/sb-1/app/3000/index.html", "/sandboxes/sb-1/app/", "/sandboxes/sb-1/app/0/x",
		"/sandboxes/sb-1/app/65536/x", "/sandboxes/sb-1/app/00080", "/sandboxes/sb-1/vnc/websockify", "/sandboxes/sb-1/cdp",
		"/sandboxes/sb-1/cdp/json/version", "/sandboxes/sb-1/pty/p1/ws", "/sandboxes/sb-1/pty/../ws", "/sandboxes/sb-1/terminal/ws",
		"/sandboxes/sb-1/files/a%2Fb", "/sandboxes/sb-1/mcp", "/sandboxes/../app/1", "/sandboxes/sb-1/app/3000/%2e%2e/x",
		"/sandboxes//app/1", "/sandboxes/sb-1", "/sandboxes/-x/app/1", "/sandboxes/sb-1/unknown/x"} {
		f.Add(s)
	}
	roots := map[tickets.Kind]string{tickets.KindVNC: "/vnc", tickets.KindCDP: "/cdp", tickets.KindPTY: "/v1/pty/",
		tickets.KindTerminal: "/v1/pty/", tickets.KindFiles: "/v1/files", tickets.KindMCP: "/mcp"}
	f.Fuzz(func(t *testing.T, p string) {
		a, err := ParsePath(p)
		if err != nil {
			return
		}
		if a.Prefix+a.Rest != p || !strings.HasPrefix(a.Prefix, PathPrefix+a.SandboxID+"/") {
			t.Fatalf("%q split into %q + %q", p, a.Prefix, a.Rest)
		}
		if a.Rest != "" && a.Rest[0] != '/' {
			t.Fatalf("%q: rest %q", p, a.Rest)
		}
		if !ValidSandboxID(a.SandboxID) || a.Subdomain {
			t.Fatalf("%q: %+v", p, a)
		}
		if a.Port != 0 && (a.Kind != tickets.KindApp || a.Port < 1 || a.Port > 65535) {
			t.Fatalf("%q: port %d on %s", p, a.Port, a.Kind)
		}
		if a.Kind == tickets.KindPTY && !ValidSandboxID(a.PTY) {
			t.Fatalf("%q: pty %q", p, a.PTY)
		}
		if !strings.HasPrefix(p, a.CookiePath()) {
			t.Fatalf("%q outside its cookie path %q", p, a.CookiePath())
		}
		port := a.Port
		if port == 0 {
			port = 8080 // the profile's app port
		}
		ar, err := AgentPath(a, port, "")
		if err != nil {
			return
		}
		root := roots[a.Kind]
		if a.Kind == tickets.KindApp {
			root = "/proxy/" + strconv.Itoa(port) + "/"
		}
		if !strings.HasPrefix(ar.EscapedPath, root) {
			t.Fatalf("%q goes to %q, outside %q", p, ar.EscapedPath, root)
		}
	})
}

// FuzzParseHost: whatever Host a request carries, the parse never panics, and an accepted address is an app route
// in subdomain form for a valid id under one of the base domains, with a port 0 (the profile's) or from 1 to
// 65535, that spells back ({port}-{id}.{base} or {id}.{base}) to itself.
func FuzzParseHost(f *testing.F) {
	bases := []string{"sandbox.example.com", "Apps.Test."}
	for _, s := range []string{"3000-sb-1.sandbox.example.com", "sb-1.sandbox.example.com", "SB-1.SANDBOX.EXAMPLE.COM.:443",
		"0-sb.sandbox.example.com", "65536-sb.sandbox.example.com", "9000-attacker.sandbox.example.com", "a.b.sandbox.example.com",
		"sandbox.example.com", ".sandbox.example.com", "3000-.sandbox.example.com", "[::1]:80", "x.apps.test", "00080-x.apps.test"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		a, ok := ParseHost(host, bases)
		if !ok {
			return
		}
		if !a.Subdomain || a.Kind != tickets.KindApp || !ValidSandboxID(a.SandboxID) || a.Port < 0 || a.Port > 65535 || a.Rest != "" {
			t.Fatalf("%q: %+v", host, a)
		}
		label := a.SandboxID
		if a.Port != 0 {
			label = strconv.Itoa(a.Port) + "-" + label
		}
		under := false
		for _, b := range bases {
			base := strings.ToLower(strings.Trim(b, "."))
			if back, ok := ParseHost(label+"."+base, bases); ok {
				if back.SandboxID != strings.ToLower(a.SandboxID) && back.SandboxID != a.SandboxID || back.Port != a.Port {
					t.Fatalf("%q: %+v spells back as %+v", host, a, back)
				}
			}
			h := strings.ToLower(host)
			if hh, _, err := net.SplitHostPort(h); err == nil {
				h = hh
			}
			if strings.HasSuffix(strings.TrimSuffix(h, "."), "."+base) {
				under = true
			}
		}
		if !under {
			t.Fatalf("%q accepted outside the base domains", host)
		}
	})
}
