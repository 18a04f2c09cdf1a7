package caddymodule_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/tickets"
)

// hostileApp is a server a tenant runs in its sandbox (or a replaced agent's answer): every answer, a WebSocket's
// 101 included, tries to set state on the origin it is served from: a console cookie (login CSRF), an expired
// session cookie for the whole host (a log-out), an origin-wide service worker scope and Clear-Site-Data.
const hostileApp = `
import base64, hashlib, http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def hostile(self):
        self.send_header("Set-Cookie", "sandgate_console=planted; Path=/console; Secure")
        self.send_header("Set-Cookie", "sandgate_session=; Max-Age=0; Path=/")
        self.send_header("Service-Worker-Allowed", "/")
        self.send_header("Clear-Site-Data", '"cookies"')
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
            self.hostile()
            self.end_headers()
            self.wfile.flush()
            self.rfile.read()
            return
        body = b"<html>hostile</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.hostile()
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("", 8000), H).serve_forever()
`

// TestEdgeHostileOrigins runs, through the real gateway over HTTPS and a real sandbox, the two attacks on the
// gateway's origin: a page of a sibling subdomain (same site as the gateway, so the SameSite=Strict session cookie
// goes along) opening the victim's WebSocket and posting an upload with the victim's cookie, refused 403
// cross_origin; and a sandbox answering Set-Cookie, Service-Worker-Allowed and Clear-Site-Data on the gateway's
// origin, on a page and on a WebSocket's 101, none of which reaches the client. The subdomain form (the sandbox's
// own origin) keeps its cookies.
func TestEdgeHostileOrigins(t *testing.T) {
	e := startEdgeIdle(t, `	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*
}

https://*.sb.localhost:{EDGE_PORT} {
	tls internal
	sandbox_ticket app {
		base_domains sb.localhost
	}
	sandbox_proxy app`, "10m")
	id := e.createSandbox(t)
	e.get(t, e.client, "/sandboxes/"+id+"/app/8000/?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil) // starts it
	ctr := e.containerOf(t, id)
	cp := exec.Command("docker", "exec", "-i", ctr, "sh", "-c", "cat > /tmp/hostile.py")
	cp.Stdin = strings.NewReader(hostileApp)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("docker", "exec", "-d", ctr, "python3", "/tmp/hostile.py").CombinedOutput(); err != nil {
		t.Fatalf("starting the hostile app: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// sessionFor spends a write ticket on path and returns the session cookie the gateway set, and the answer.
	sessionFor := func(path string, kind tickets.Kind) (string, *http.Response) {
		t.Helper()
		for {
			status, _, resp := e.get(t, e.client, path+"?ticket="+e.ticket(t, id, kind, tickets.PermWrite), nil)
			for _, ck := range resp.Cookies() {
				if ck.Name == "sandgate_session" && ck.Value != "" && (status != http.StatusBadGateway || kind != tickets.KindApp) {
					return "sandgate_session=" + ck.Value, resp
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("no session from %s: %d", path, status)
			}
			time.Sleep(300 * time.Millisecond) // the app answers 502 through the agent until it listens
		}
	}
	appCookie, page := sessionFor("/sandboxes/"+id+"/app/8000/", tickets.KindApp)
	filesCookie, _ := sessionFor("/sandboxes/"+id+"/files", tickets.KindFiles)
	own := e.base
	sibling := fmt.Sprintf("https://9000-attacker.sb.localhost:%d", e.port)
	wss := strings.Replace(e.base, "https://", "wss://", 1)

	t.Run("sandbox answers cannot set cookies on the gateway origin", func(t *testing.T) {
		checkStripped(t, "page", page.Header, true)
		c, resp, err := websocket.Dial(ctx, wss+"/sandboxes/"+id+"/app/8000/ws", &websocket.DialOptions{HTTPClient: e.client,
			HTTPHeader: http.Header{"Cookie": {appCookie}, "Origin": {own}, "Sec-Fetch-Site": {"same-origin"}}})
		if err != nil {
			t.Fatalf("own page's WebSocket: %v", err)
		}
		c.CloseNow()
		checkStripped(t, "101", resp.Header, false)

		// The subdomain form is the sandbox's own origin: its cookies are its own business.
		sub := e.subdomainClient()
		resp, err = sub.Get(fmt.Sprintf("https://8000-%s.sb.localhost:%d/?ticket=%s", id, e.port, e.ticket(t, id, tickets.KindApp, tickets.PermRead)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := len(resp.Header.Values("Set-Cookie")); n != 3 { // the gateway's session and the app's two
			t.Errorf("subdomain form: %d Set-Cookie, want 3: %q", n, resp.Header.Values("Set-Cookie"))
		}
	})

	t.Run("a sibling origin cannot use the session cookie", func(t *testing.T) {
		_, resp, err := websocket.Dial(ctx, wss+"/sandboxes/"+id+"/app/8000/ws", &websocket.DialOptions{HTTPClient: e.client,
			HTTPHeader: http.Header{"Cookie": {appCookie}, "Origin": {sibling}, "Sec-Fetch-Site": {"same-site"}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("WebSocket from a sibling origin with the victim's cookie: %v %v", err, resp)
		}
		for _, hdr := range []http.Header{
			{"Cookie": {filesCookie}, "Origin": {sibling}, "Sec-Fetch-Site": {"same-site"}},
			{"Cookie": {filesCookie}, "Origin": {sibling}}, // a browser without fetch metadata
		} {
			req, _ := http.NewRequest(http.MethodPost, e.base+"/sandboxes/"+id+"/files/upload?path=/tmp/planted", strings.NewReader("planted"))
			req.Header = hdr
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"code":"cross_origin"`) {
				t.Fatalf("upload from a sibling origin with the victim's cookie: %d %s", resp.StatusCode, body)
			}
		}
		if out, err := exec.Command("docker", "exec", ctr, "test", "-e", "/tmp/planted").CombinedOutput(); err == nil {
			t.Fatalf("the upload reached the sandbox %s", out)
		}
	})
}

// checkStripped asserts that what the sandbox sent to claim the origin is gone; withSession says whether the
// gateway's own session cookie (set by an accepted ticket) must be the one Set-Cookie left.
func checkStripped(t *testing.T, what string, h http.Header, withSession bool) {
	t.Helper()
	for _, ck := range h.Values("Set-Cookie") {
		if !withSession || !strings.HasPrefix(ck, "sandgate_session=") || strings.Contains(ck, "Max-Age=0") {
			t.Errorf("%s: Set-Cookie %q reached the client", what, ck)
		}
	}
	for _, name := range []string{"Service-Worker-Allowed", "Clear-Site-Data"} {
		if v := h.Get(name); v != "" {
			t.Errorf("%s: %s %q reached the client", what, name, v)
		}
	}
	if csp := h.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") {
		t.Errorf("%s: CSP %q", what, csp)
	}
}
