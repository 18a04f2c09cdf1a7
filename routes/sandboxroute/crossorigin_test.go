package sandboxroute

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/tickets"
)

func TestFromOwnOrigin(t *testing.T) {
	for _, c := range []struct {
		name, url, origin, site string
		want                    bool
	}{
		{"fetch metadata same-origin", "https://gw.example.com/x", "", "same-origin", true},
		{"typed or bookmarked", "https://gw.example.com/x", "", "none", true},
		{"sibling subdomain", "https://gw.example.com/x", "https://9000-a.sandbox.example.com", "same-site", false},
		{"other site", "https://gw.example.com/x", "https://evil.test", "cross-site", false},
		{"metadata wins over a forged-looking origin", "https://gw.example.com/x", "https://gw.example.com", "same-site", false},
		{"own origin, no metadata", "https://gw.example.com/x", "https://gw.example.com", "", true},
		{"own origin with port", "https://gw.example.com:8443/x", "https://gw.example.com:8443", "", true},
		{"scheme differs", "https://gw.example.com/x", "http://gw.example.com", "", false},
		{"sibling, no metadata", "https://gw.example.com/x", "https://9000-a.sandbox.example.com", "", false},
		{"sandboxed document", "https://gw.example.com/x", "null", "", false},
		{"no browser page", "https://gw.example.com/x", "", "", true},
		{"plain http site", "http://gw.example.com/x", "http://gw.example.com", "", true},
		{"app subdomain's own page", "https://9000-v.sandbox.example.com/ws", "https://9000-v.sandbox.example.com", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", c.url, nil)
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.site != "" {
				r.Header.Set("Sec-Fetch-Site", c.site)
			}
			if got := FromOwnOrigin(r); got != c.want {
				t.Fatalf("FromOwnOrigin = %v, want %v", got, c.want)
			}
		})
	}
}

// The attack: the victim holds a session cookie for their desktop and files; a page on an attacker's app subdomain
// (same site as the gateway when both share a registrable domain, so the SameSite=Strict cookie goes along) opens
// the victim's VNC WebSocket and posts an upload. Both are refused; the same requests from the gateway's own pages,
// and tickets from anywhere, still pass.
func TestGateRefusesSessionFromAnotherOrigin(t *testing.T) {
	g, iss := newGate(t, time.Minute)
	g.BaseDomains = []string{"sandbox.example.com"}
	session := func(url string, kind tickets.Kind) *http.Cookie {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", url+"?ticket="+mint(t, iss, "victim", kind, tickets.PermWrite), nil)
		if _, err := g.Authorize(w, r); err != nil {
			t.Fatal(err)
		}
		return w.Result().Cookies()[0]
	}
	vnc := session("https://gw.example.com/sandboxes/victim/vnc/", tickets.KindVNC)
	files := session("https://gw.example.com/sandboxes/victim/files", tickets.KindFiles)
	app := session("https://9000-victim.sandbox.example.com/", tickets.KindApp)

	websocket := func(url string) *http.Request {
		r := httptest.NewRequest("GET", url, nil)
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		return r
	}
	const sibling = "https://9000-attacker.sandbox.example.com"
	for _, c := range []struct {
		name         string
		r            *http.Request
		ck           *http.Cookie
		origin, site string
		ticket       tickets.Kind
		ok           bool
	}{
		{"vnc websocket from a sibling", websocket("https://gw.example.com/sandboxes/victim/vnc/websockify"), vnc, sibling, "", "", false},
		{"vnc websocket from a sibling with metadata", websocket("https://gw.example.com/sandboxes/victim/vnc/websockify"), vnc, sibling, "same-site", "", false},
		{"upload from a sibling", httptest.NewRequest("POST", "https://gw.example.com/sandboxes/victim/files/upload?path=/x", strings.NewReader("x")), files, sibling, "same-site", "", false},
		{"upload from a sibling without metadata", httptest.NewRequest("POST", "https://gw.example.com/sandboxes/victim/files/upload?path=/x", strings.NewReader("x")), files, sibling, "", "", false},
		{"app websocket from a sibling app", websocket("https://9000-victim.sandbox.example.com/ws"), app, sibling, "same-site", "", false},
		{"cross-site", websocket("https://gw.example.com/sandboxes/victim/vnc/websockify"), vnc, "https://evil.test", "cross-site", "", false},
		{"desktop page's own websocket", websocket("https://gw.example.com/sandboxes/victim/vnc/websockify"), vnc, "https://gw.example.com", "same-origin", "", true},
		{"own upload", httptest.NewRequest("POST", "https://gw.example.com/sandboxes/victim/files/upload?path=/x", strings.NewReader("x")), files, "https://gw.example.com", "same-origin", "", true},
		{"app's own websocket", websocket("https://9000-victim.sandbox.example.com/ws"), app, "https://9000-victim.sandbox.example.com", "same-origin", "", true},
		{"a reload", httptest.NewRequest("GET", "https://gw.example.com/sandboxes/victim/vnc/", nil), vnc, "", "none", "", true},
		{"a ticket from a sibling is a ticket", websocket("https://gw.example.com/sandboxes/victim/vnc/websockify"), nil, sibling, "same-site", tickets.KindVNC, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			if c.ck != nil {
				r.AddCookie(c.ck)
			}
			if c.ticket != "" {
				r.URL.RawQuery = TicketParam + "=" + mint(t, iss, "victim", c.ticket, tickets.PermWrite)
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.site != "" {
				r.Header.Set("Sec-Fetch-Site", c.site)
			}
			_, err := g.Authorize(httptest.NewRecorder(), r)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrCrossOrigin) {
				t.Fatalf("want ErrCrossOrigin, got %v", err)
			}
		})
	}
}

func TestWriteCrossOrigin(t *testing.T) {
	w := httptest.NewRecorder()
	WriteCrossOrigin(w, "req-1")
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `"code":"cross_origin"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// A replaced agent answers a path-form route with cookies for the console's origin, an origin-wide service worker
// scope and Clear-Site-Data, on an ordinary answer and on a WebSocket's 101: none of it reaches the client, the
// gateway's own session cookie does, and the subdomain form (the sandbox's own origin) keeps its cookies.
func TestGuardAnswer(t *testing.T) {
	// hostile is what the proxy relays from a replaced agent.
	hostile := func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "sandgate_console=planted; Path=/console")
		h.Add("Set-Cookie", "sandgate_session=; Max-Age=0; Path=/")
		h.Set("Service-Worker-Allowed", "/")
		h.Set("Clear-Site-Data", `"cookies", "storage"`)
		if r.Header.Get("Upgrade") == "websocket" {
			h.Set("Connection", "Upgrade")
			h.Set("Upgrade", "websocket")
			w.WriteHeader(http.StatusSwitchingProtocols)
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_ = brw.Flush()
			// Echo until the client leaves, reading through brw: bytes the server's background read took before
			// the hijack (the client writes as soon as it sees the 101) are in its buffer, not on conn.
			_, _ = io.Copy(conn, brw)
			return
		}
		_, _ = io.WriteString(w, "<html>")
	}
	for _, c := range []struct {
		name      string
		addr      Address
		stripped  bool
		websocket bool
	}{
		{"path form", Address{SandboxID: "s1", Kind: tickets.KindApp}, true, false},
		{"path form websocket", Address{SandboxID: "s1", Kind: tickets.KindVNC}, true, true},
		{"subdomain form", Address{SandboxID: "s1", Kind: tickets.KindApp, Subdomain: true}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Add("Set-Cookie", "sandgate_session=ours; Path=/sandboxes/s1/app")
				// As Caddy's reverse_proxy does: the upstream's headers are copied into w.Header(), then
				// WriteHeader (101 included), then Hijack for a stream.
				hostile(GuardAnswer(w, c.addr), r)
			}))
			defer gw.Close()
			var resp *http.Response
			if c.websocket {
				conn, err := net.Dial("tcp", gw.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_, _ = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
				br := bufio.NewReader(conn)
				resp, err = http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("status %d", resp.StatusCode)
				}
				// The stream still works through the guard (Hijack reached the connection).
				_, _ = io.WriteString(conn, "ping")
				buf := make([]byte, 4)
				if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
					t.Fatalf("echo %q %v", buf, err)
				}
			} else {
				var err error
				resp, err = http.Get(gw.URL + "/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			cookies := resp.Header.Values("Set-Cookie")
			if c.stripped {
				if len(cookies) != 1 || cookies[0] != "sandgate_session=ours; Path=/sandboxes/s1/app" {
					t.Errorf("Set-Cookie %q, want only the gateway's own", cookies)
				}
				for _, h := range []string{"Service-Worker-Allowed", "Clear-Site-Data"} {
					if v := resp.Header.Get(h); v != "" {
						t.Errorf("%s %q reached the client", h, v)
					}
				}
			} else if len(cookies) != 3 || resp.Header.Get("Service-Worker-Allowed") != "/" {
				t.Errorf("the sandbox's own origin lost its headers: %v", resp.Header)
			}
		})
	}
}
