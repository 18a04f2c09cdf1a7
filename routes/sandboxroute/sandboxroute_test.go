package sandboxroute

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/tickets"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path string
		want Address
		bad  bool
	}{
		{path: "/sandboxes/sandbox-1/app/", want: Address{SandboxID: "sandbox-1", Kind: tickets.KindApp, Prefix: "/sandboxes/sandbox-1/app", Rest: "/"}},
		{path: "/sandboxes/sandbox-1/app/3000/a%2Fb/c", want: Address{SandboxID: "sandbox-1", Kind: tickets.KindApp, Port: 3000, Prefix: "/sandboxes/sandbox-1/app/3000", Rest: "/a%2Fb/c"}},
		{path: "/sandboxes/sandbox-1/app/3000", want: Address{SandboxID: "sandbox-1", Kind: tickets.KindApp, Port: 3000, Prefix: "/sandboxes/sandbox-1/app/3000"}},
		{path: "/sandboxes/sandbox-1/app/70000/x", want: Address{SandboxID: "sandbox-1", Kind: tickets.KindApp, Prefix: "/sandboxes/sandbox-1/app", Rest: "/70000/x"}},
		{path: "/sandboxes/s/cdp", want: Address{SandboxID: "s", Kind: tickets.KindCDP, Prefix: "/sandboxes/s/cdp"}},
		{path: "/sandboxes/s/cdp/json/version", want: Address{SandboxID: "s", Kind: tickets.KindCDP, Prefix: "/sandboxes/s/cdp", Rest: "/json/version"}},
		{path: "/sandboxes/s/vnc/websockify", want: Address{SandboxID: "s", Kind: tickets.KindVNC, Prefix: "/sandboxes/s/vnc", Rest: "/websockify"}},
		{path: "/sandboxes/s/pty/p1", want: Address{SandboxID: "s", Kind: tickets.KindPTY, PTY: "p1", Prefix: "/sandboxes/s/pty", Rest: "/p1"}},
		{path: "/sandboxes/s/pty/p1/ws", want: Address{SandboxID: "s", Kind: tickets.KindPTY, PTY: "p1", Prefix: "/sandboxes/s/pty", Rest: "/p1/ws"}},
		{path: "/sandboxes/s/pty/p1/other", bad: true},
		{path: "/sandboxes/s/pty/", bad: true},
		{path: "/sandboxes/s/shell/", bad: true},
		{path: "/sandboxes/../app/", bad: true},
		{path: "/sandboxes//app/", bad: true},
		{path: "/sandboxes/s", bad: true},
		{path: "/v1/sandboxes/s/app/", bad: true},
	}
	for _, tc := range tests {
		got, err := ParsePath(tc.path)
		if tc.bad {
			if !errors.Is(err, ErrNotSandboxRoute) {
				t.Errorf("ParsePath(%q) = %+v, %v; want ErrNotSandboxRoute", tc.path, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v", tc.path, got, err, tc.want)
		}
	}
}

func TestParseHost(t *testing.T) {
	bases := []string{"sandbox.example.com", "apps.test"}
	tests := []struct {
		host string
		id   string
		port int
		ok   bool
	}{
		{"sandbox-abc.sandbox.example.com", "sandbox-abc", 0, true},
		{"3000-sandbox-abc.sandbox.example.com:8443", "sandbox-abc", 3000, true},
		{"SANDBOX-ABC.Sandbox.Example.com.", "sandbox-abc", 0, true},
		{"8080-x.apps.test", "x", 8080, true},
		{"99999-x.apps.test", "99999-x", 0, true},
		{"a.b.sandbox.example.com", "", 0, false},
		{"sandbox.example.com", "", 0, false},
		{"evil-sandbox.example.com", "", 0, false},
		{"x.example.org", "", 0, false},
	}
	for _, tc := range tests {
		a, ok := ParseHost(tc.host, bases)
		if ok != tc.ok || a.SandboxID != tc.id || a.Port != tc.port || (ok && (!a.Subdomain || a.Kind != tickets.KindApp)) {
			t.Errorf("ParseHost(%q) = %+v, %v", tc.host, a, ok)
		}
	}
}

func TestAgentPath(t *testing.T) {
	tests := []struct {
		path, query string
		port        int
		want        string
		wantQuery   string
		bad         bool
	}{
		{path: "/sandboxes/s/app/3000/a%2Fb", query: "x=1", want: "/proxy/3000/a%2Fb", wantQuery: "x=1"},
		{path: "/sandboxes/s/app/", port: 8080, want: "/proxy/8080/"},
		{path: "/sandboxes/s/app/3000", want: "/proxy/3000/"},
		{path: "/sandboxes/s/app/x", bad: true},
		{path: "/sandboxes/s/vnc/websockify", want: "/vnc/websockify"},
		{path: "/sandboxes/s/cdp", want: "/cdp"},
		{path: "/sandboxes/s/cdp/devtools/page/AB", want: "/cdp/devtools/page/AB"},
		{path: "/sandboxes/s/pty/p1", query: "since=10", want: "/v1/pty/p1/ws", wantQuery: "since=10"},
		{path: "/sandboxes/s/terminal/ws", query: "pty=p2&takeover=1", want: "/v1/pty/p2/ws", wantQuery: "takeover=1"},
		{path: "/sandboxes/s/terminal/ws", query: "pty=../x", bad: true},
		{path: "/sandboxes/s/terminal/", bad: true},
		{path: "/sandboxes/s/files", query: "path=a.txt", want: "/v1/files", wantQuery: "path=a.txt"},
		{path: "/sandboxes/s/mcp", want: "/mcp"},
		{path: "/sandboxes/s/mcp/", want: "/mcp"},
		{path: "/sandboxes/s/mcp/../v1/exec", bad: true},
	}
	for _, tc := range tests {
		a, err := ParsePath(tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		got, err := AgentPath(a, pick(a.Port, tc.port), tc.query)
		if tc.bad {
			if err == nil {
				t.Errorf("AgentPath(%s) = %+v, want error", tc.path, got)
			}
			continue
		}
		if err != nil || got.EscapedPath != tc.want || got.RawQuery != tc.wantQuery {
			t.Errorf("AgentPath(%s?%s) = %+v, %v; want %s?%s", tc.path, tc.query, got, err, tc.want, tc.wantQuery)
		}
		r := httptest.NewRequest("GET", "http://gw"+tc.path, nil)
		if err := got.Apply(r); err != nil || r.URL.EscapedPath() != tc.want {
			t.Errorf("Apply: %q, %v", r.URL.EscapedPath(), err)
		}
	}
}

func pick(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func TestRequiredPermission(t *testing.T) {
	ws := func(r *http.Request) *http.Request {
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Upgrade", "websocket")
		return r
	}
	tests := []struct {
		kind tickets.Kind
		r    *http.Request
		want tickets.Permission
	}{
		{tickets.KindApp, httptest.NewRequest("GET", "/", nil), tickets.PermRead},
		{tickets.KindApp, httptest.NewRequest("POST", "/", nil), tickets.PermWrite},
		{tickets.KindApp, ws(httptest.NewRequest("GET", "/", nil)), tickets.PermRead},
		{tickets.KindTerminal, ws(httptest.NewRequest("GET", "/", nil)), tickets.PermWrite},
		{tickets.KindCDP, ws(httptest.NewRequest("GET", "/", nil)), tickets.PermWrite},
		{tickets.KindVNC, ws(httptest.NewRequest("GET", "/websockify", nil)), tickets.PermRead}, // agent filters to view-only
		{tickets.KindCDP, httptest.NewRequest("GET", "/json/version", nil), tickets.PermRead},
		{tickets.KindFiles, httptest.NewRequest("PUT", "/", nil), tickets.PermWrite},
		{tickets.KindFiles, httptest.NewRequest("HEAD", "/", nil), tickets.PermRead},
		{tickets.KindApp, h2ws(), tickets.PermRead},
		{tickets.KindPTY, h2ws(), tickets.PermWrite},
		{tickets.KindApp, httptest.NewRequest("CONNECT", "/", nil), tickets.PermWrite},
	}
	for i, tc := range tests {
		if got := RequiredPermission(tc.kind, tc.r); got != tc.want {
			t.Errorf("%d: %s %s = %s, want %s", i, tc.kind, tc.r.Method, got, tc.want)
		}
	}
}

// h2ws is an HTTP/2 extended CONNECT WebSocket request as Go's server presents it.
func h2ws() *http.Request {
	r := httptest.NewRequest("CONNECT", "/", nil)
	r.ProtoMajor, r.Proto = 2, "HTTP/2.0"
	r.Header.Set(":protocol", "websocket")
	return r
}

func TestQueryHelpers(t *testing.T) {
	if got := RemoveQueryParam("a=1&ticket=x.y.z&b=%20&ticket=2", "ticket"); got != "a=1&b=%20" {
		t.Errorf("RemoveQueryParam = %q", got)
	}
	if got := RemoveQueryParam("ticket=x", "ticket"); got != "" {
		t.Errorf("RemoveQueryParam = %q", got)
	}
	if v, ok := QueryParam("a=1&pty=p%2D1", "pty"); !ok || v != "p-1" {
		t.Errorf("QueryParam = %q %v", v, ok)
	}
}

const testSecret = "0123456789abcdef0123456789abcdef-route"

func newGate(t *testing.T, session time.Duration) (*Gate, *tickets.Issuer) {
	t.Helper()
	v, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	return &Gate{Verifier: v, BaseDomains: []string{"sb.test"}, SessionLifetime: session}, iss
}

func mint(t *testing.T, iss *tickets.Issuer, id string, kind tickets.Kind, perm tickets.Permission) string {
	t.Helper()
	tk, err := iss.Issue(tickets.IssueRequest{SandboxID: id, Kind: kind, Permission: perm})
	if err != nil {
		t.Fatal(err)
	}
	return tk.Token
}

func reasonOf(err error) tickets.Reason {
	var te *tickets.Error
	if errors.As(err, &te) {
		return te.Reason
	}
	return ""
}

func TestGateTicketOnceThenSession(t *testing.T) {
	g, iss := newGate(t, time.Minute)
	tok := mint(t, iss, "s1", tickets.KindApp, tickets.PermRead)
	r := httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/3000/page?x=1&ticket="+tok, nil)
	r.Header.Set("X-Sandgate-Token", "client-forged")
	r.Header.Set("X-Sandgate-Permission", "write") // a read holder must not lift the agent's view-only filter
	r.Header.Set("Cookie", "other=1")
	w := httptest.NewRecorder()
	grant, err := g.Authorize(w, r)
	if err != nil {
		t.Fatal(err)
	}
	if grant.Via != "query" || grant.Address.Port != 3000 || grant.Claims.SandboxID != "s1" {
		t.Fatalf("grant = %+v", grant)
	}
	if r.URL.RawQuery != "x=1" || strings.Contains(r.RequestURI, "ticket") {
		t.Fatalf("ticket not stripped: %q %q", r.URL.RawQuery, r.RequestURI)
	}
	if r.Header.Get("X-Sandgate-Token") != "" || r.Header.Get("X-Sandgate-Permission") != "" || r.Header.Get("Cookie") != "other=1" {
		t.Fatalf("headers not cleaned: %v", r.Header)
	}
	set := w.Result().Cookies()
	if len(set) != 1 || set[0].Path != "/sandboxes/s1/app" || !set[0].HttpOnly || !set[0].Secure || set[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie = %+v", set)
	}

	// The same ticket again: replayed.
	r2 := httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/3000/page?ticket="+tok, nil)
	if _, err := g.Authorize(httptest.NewRecorder(), r2); reasonOf(err) != tickets.ReasonReplayed {
		t.Fatalf("second use: %v", err)
	}

	// A reloaded page still carries the spent ticket: its session admits it.
	r2 = httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/3000/page?ticket="+tok, nil)
	r2.AddCookie(set[0])
	if grant, err := g.Authorize(httptest.NewRecorder(), r2); err != nil || grant.Via != "session" || r2.URL.RawQuery != "" {
		t.Fatalf("reload with spent ticket and session: %+v %v %q", grant, err, r2.URL.RawQuery)
	}

	// The session cookie admits an asset request, and is removed before proxying; an app Authorization stays.
	r3 := httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/3000/app.js", nil)
	r3.AddCookie(set[0])
	r3.Header.Set("Authorization", "Bearer app-own-token")
	grant, err = g.Authorize(httptest.NewRecorder(), r3)
	if err != nil || grant.Via != "session" {
		t.Fatalf("session: %+v %v", grant, err)
	}
	if r3.Header.Get("Cookie") != "" || r3.Header.Get("Authorization") != "Bearer app-own-token" {
		t.Fatalf("after session: %v", r3.Header)
	}
	// A read session cannot POST.
	r4 := httptest.NewRequest("POST", "https://gw/sandboxes/s1/app/3000/api", nil)
	r4.AddCookie(set[0])
	if _, err := g.Authorize(httptest.NewRecorder(), r4); err == nil {
		t.Fatal("read session admitted a POST")
	}
	// Nor another sandbox.
	r5 := httptest.NewRequest("GET", "https://gw/sandboxes/s2/app/", nil)
	r5.AddCookie(set[0])
	if _, err := g.Authorize(httptest.NewRecorder(), r5); reasonOf(err) != tickets.ReasonWrongSandbox {
		t.Fatalf("other sandbox: %v", err)
	}
}

func TestGateBearerAndSubdomain(t *testing.T) {
	g, iss := newGate(t, 0)
	tok := mint(t, iss, "s1", tickets.KindApp, tickets.PermWrite)
	r := httptest.NewRequest("POST", "https://8080-s1.sb.test/api", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	grant, err := g.Authorize(w, r)
	if err != nil {
		t.Fatal(err)
	}
	if grant.Via != "bearer" || !grant.Address.Subdomain || grant.Address.Port != 8080 || grant.Address.Rest != "/api" {
		t.Fatalf("grant = %+v", grant)
	}
	if r.Header.Get("Authorization") != "" || len(w.Result().Cookies()) != 0 {
		t.Fatal("bearer not stripped, or a cookie set with sessions off")
	}
	// A CDP ticket is refused on the app route; a terminal route refuses an app ticket.
	cdp := mint(t, iss, "s1", tickets.KindCDP, tickets.PermWrite)
	r = httptest.NewRequest("GET", "https://s1.sb.test/?ticket="+cdp, nil)
	if _, err := g.Authorize(httptest.NewRecorder(), r); reasonOf(err) != tickets.ReasonWrongKind {
		t.Fatalf("cdp ticket on app: %v", err)
	}
	// No credential at all.
	r = httptest.NewRequest("GET", "https://gw/sandboxes/s1/cdp/json/version", nil)
	if _, err := g.Authorize(httptest.NewRecorder(), r); reasonOf(err) != tickets.ReasonMissing {
		t.Fatalf("no ticket: %v", err)
	}
	// A gate restricted to one kind does not admit others.
	g.Kind = tickets.KindCDP
	r = httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/?ticket="+tok, nil)
	if _, err := g.Authorize(httptest.NewRecorder(), r); !errors.Is(err, ErrNotSandboxRoute) || IsRefusal(err) {
		t.Fatalf("kind restriction: %v", err)
	}
}

type fakeStarter struct {
	target  sandboxes.Target
	err     error
	leases  int
	started int
}

func (f *fakeStarter) EnsureRunning(context.Context, string) (sandboxes.Target, error) {
	f.started++
	return f.target, f.err
}

func (f *fakeStarter) Acquire(string) (func(), error) {
	f.leases++
	return func() { f.leases-- }, nil
}

func TestRoutePrepare(t *testing.T) {
	st := &fakeStarter{target: sandboxes.Target{SandboxID: "s", Addr: "10.0.0.2:7777", Token: "tok", AppPort: 5173}}
	rt := &Route{Sandboxes: st, Kind: tickets.KindApp}
	a, _ := ParsePath("/sandboxes/s/app/index.html")
	p, err := rt.Prepare(context.Background(), a, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Agent.EscapedPath != "/proxy/5173/index.html" || st.leases != 1 {
		t.Fatalf("prepared %+v, leases %d", p, st.leases)
	}
	p.Release()
	if st.leases != 0 {
		t.Fatal("lease not released")
	}
	// Wrong kind for the route.
	c, _ := ParsePath("/sandboxes/s/cdp")
	if _, err := rt.Prepare(context.Background(), c, ""); err == nil {
		t.Fatal("cdp address prepared on an app route")
	}
	// A dead sandbox: 410 container_died with the reason, and no lease held.
	st.err = &sandboxes.Error{Code: sandboxes.CodeContainerDied, Message: "container died: OOM killed", Details: map[string]any{"reason": "oom"}}
	_, err = rt.Prepare(context.Background(), a, "")
	w := httptest.NewRecorder()
	WriteLifecycleError(w, err, "req-1")
	body := w.Body.String()
	if w.Code != http.StatusGone || !strings.Contains(body, `"code":"container_died"`) || !strings.Contains(body, `"reason":"oom"`) || !strings.Contains(body, `"request_id":"req-1"`) {
		t.Fatalf("dead sandbox answered %d %s", w.Code, body)
	}
	if st.leases != 0 {
		t.Fatal("lease held after a failed start")
	}
}

func TestStatusFor(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{sandboxes.Errorf(sandboxes.CodeNotFound, "no such sandbox"), 404},
		{sandboxes.Errorf(sandboxes.CodeContainerDied, "died"), 410},
		{sandboxes.Errorf(sandboxes.CodeNotReady, "starting"), 503},
		{sandboxes.Errorf(sandboxes.CodeExpired, "expired"), 409},
		{sandboxes.Errorf(sandboxes.CodeImageNotAllowed, "not on the allow-list"), 403},
		{context.DeadlineExceeded, 504},
		{errors.New("engine down"), 502},
	}
	for _, tc := range tests {
		if got, _ := StatusFor(tc.err, ""); got != tc.want {
			t.Errorf("StatusFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestSetContentHeaders(t *testing.T) {
	for _, tc := range []struct {
		name      string
		addr      Address
		file      string
		csp, disp string
	}{
		{"app in path form runs sandboxed", Address{Kind: tickets.KindApp}, "", SandboxCSP, ""},
		{"app on the content origin is left alone", Address{Kind: tickets.KindApp, Subdomain: true}, "", "", ""},
		{"files are downloads", Address{Kind: tickets.KindFiles}, "/workspace/x.html", SandboxCSP, `attachment; filename=x.html`},
		{"files without a name", Address{Kind: tickets.KindFiles}, "", SandboxCSP, "attachment"},
		{"odd names are quoted", Address{Kind: tickets.KindFiles}, `/w/a "b".html`, SandboxCSP, `attachment; filename="a \"b\".html"`},
		{"terminal responses run sandboxed too", Address{Kind: tickets.KindTerminal}, "", SandboxCSP, ""},
		{"mcp responses run sandboxed too", Address{Kind: tickets.KindMCP}, "", SandboxCSP, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			SetContentHeaders(h, tc.addr, tc.file)
			if got := h.Get("Content-Security-Policy"); got != tc.csp {
				t.Errorf("CSP %q, want %q", got, tc.csp)
			}
			if got := h.Get("Content-Disposition"); got != tc.disp {
				t.Errorf("Content-Disposition %q, want %q", got, tc.disp)
			}
		})
	}
}

// keysOf is a fake KeyChecker: token -> the sandboxes it may reach.
type keysOf map[string][]string

func (k keysOf) KeyAllows(_ context.Context, token, id string) bool {
	for _, s := range k[token] {
		if s == id {
			return true
		}
	}
	return false
}

func TestGateAPIKeyOnMCP(t *testing.T) {
	g, iss := newGate(t, time.Minute)
	g.APIKeys = keysOf{"key-alice": {"s1"}}
	tests := []struct {
		name, method, path, auth string
		via                      string // "" means refused
	}{
		{"owner's key on mcp", "POST", "/sandboxes/s1/mcp", "Bearer key-alice", "api_key"},
		{"owner's key on the event stream", "GET", "/sandboxes/s1/mcp", "Bearer key-alice", "api_key"},
		{"another sandbox", "POST", "/sandboxes/s2/mcp", "Bearer key-alice", ""},
		{"unknown key", "POST", "/sandboxes/s1/mcp", "Bearer key-mallory", ""},
		{"a key opens no other kind", "GET", "/sandboxes/s1/files", "Bearer key-alice", ""},
		{"a key opens no terminal", "GET", "/sandboxes/s1/terminal/", "Bearer key-alice", ""},
		{"mcp ticket", "POST", "/sandboxes/s1/mcp", "Bearer " + mint(t, iss, "s1", tickets.KindMCP, tickets.PermWrite), "bearer"},
		{"a read ticket cannot drive mcp", "GET", "/sandboxes/s1/mcp", "Bearer " + mint(t, iss, "s1", tickets.KindMCP, tickets.PermRead), ""},
		{"a terminal ticket is not an mcp ticket", "POST", "/sandboxes/s1/mcp", "Bearer " + mint(t, iss, "s1", tickets.KindTerminal, tickets.PermWrite), ""},
		{"nothing", "POST", "/sandboxes/s1/mcp", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "https://gw"+tc.path, nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			grant, err := g.Authorize(w, r)
			if tc.via == "" {
				if err == nil || !IsRefusal(err) {
					t.Fatalf("admitted (%+v) or not a refusal: %v", grant, err)
				}
				return
			}
			if err != nil || grant.Via != tc.via {
				t.Fatalf("grant %+v, %v; want via %s", grant, err, tc.via)
			}
			if r.Header.Get("Authorization") != "" {
				t.Fatal("the credential reached the agent")
			}
			if tc.via == "api_key" && len(w.Result().Cookies()) != 0 {
				t.Fatal("an API key got a session cookie")
			}
		})
	}
}

// TestCDPStateChangesNeedWrite: a read CDP ticket may look (/json/version, /json/list, the DevTools frontend) but
// not open, close or focus tabs in any spelling, in any spelling; a write ticket may.
func TestCDPStateChangesNeedWrite(t *testing.T) {
	for _, tc := range []struct {
		rest string
		read bool
	}{
		{"", true}, {"/", true}, {"/json", true}, {"/json/", true}, {"/json/version", true}, {"/json/list", true},
		{"/json/protocol", true}, {"/devtools/inspector.html", true},
		{"/json/new", false}, {"/json/new/", false}, {"/json/close/ABC", false}, {"/json/activate/ABC", false},
		{"/json%2Fnew", false}, {"/json/%6eew", false}, {"//json/new", false}, {"/json/./new", false},
		{"/json/list/../new", false}, {"/JSON/new", false}, {"/devtools/../json/new", false},
		{"/devtools/json/new", false}, {"/json/version%00", false}, {"/json\\new", false}, {"/json/%", false},
	} {
		a := Address{SandboxID: "s1", Kind: tickets.KindCDP, Rest: tc.rest}
		want := tickets.PermWrite
		if tc.read {
			want = tickets.PermRead
		}
		if got := RequiredPermissionAt(a, httptest.NewRequest("GET", "/", nil)); got != want {
			t.Errorf("GET %q needs %s, want %s", tc.rest, got, want)
		}
	}
	g, iss := newGate(t, 0)
	for _, target := range []string{
		"https://gw/sandboxes/s1/cdp/json/new?url=https://example.com",
		"https://gw/sandboxes/s1/cdp/json%2Fnew?url=https://example.com",
		"https://gw/sandboxes/s1/cdp/json/close/ABC",
		"https://gw/sandboxes/s1/cdp/json/activate/ABC",
	} {
		tok := mint(t, iss, "s1", tickets.KindCDP, tickets.PermRead)
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		r := httptest.NewRequest("GET", target+sep+"ticket="+tok, nil)
		if _, err := g.Authorize(httptest.NewRecorder(), r); reasonOf(err) != tickets.ReasonReadOnly {
			t.Errorf("read ticket on %s: %v, want read_only", target, err)
		}
		tok = mint(t, iss, "s1", tickets.KindCDP, tickets.PermWrite)
		r = httptest.NewRequest("GET", target+sep+"ticket="+tok, nil)
		if _, err := g.Authorize(httptest.NewRecorder(), r); err != nil {
			t.Errorf("write ticket on %s: %v", target, err)
		}
	}
	tok := mint(t, iss, "s1", tickets.KindCDP, tickets.PermRead)
	if _, err := g.Authorize(httptest.NewRecorder(), httptest.NewRequest("GET", "https://gw/sandboxes/s1/cdp/json/list?ticket="+tok, nil)); err != nil {
		t.Errorf("read ticket on /json/list: %v", err)
	}
}

// downStore is a shared spent-ticket store that cannot be reached.
type downStore struct{}

func (downStore) Spend(context.Context, string, string, time.Time, time.Duration) error {
	return tickets.Unavailable(errors.New("dial tcp 127.0.0.1:6379: connection refused"))
}

// TestGateStoreDownFailsClosed: with the fleet's spent-ticket store down, a ticket in the query or a bearer is
// refused with the retryable error (never admitted); a session cookie, which needs no store, still admits.
func TestGateStoreDownFailsClosed(t *testing.T) {
	g, iss := newGate(t, time.Minute)
	tok := mint(t, iss, "s1", tickets.KindApp, tickets.PermRead)
	w := httptest.NewRecorder()
	if _, err := g.Authorize(w, httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/?ticket="+tok, nil)); err != nil {
		t.Fatal(err)
	}
	session := w.Result().Cookies()[0]
	down, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: []byte(testSecret), Spent: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	g.Verifier = down
	fresh := mint(t, iss, "s1", tickets.KindApp, tickets.PermRead)
	r := httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/?ticket="+fresh, nil)
	if _, err := g.Authorize(httptest.NewRecorder(), r); !errors.Is(err, tickets.ErrUnavailable) || !IsRefusal(err) {
		t.Fatalf("query ticket with the store down: %v", err)
	}
	r = httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/", nil)
	r.Header.Set("Authorization", "Bearer "+fresh)
	if _, err := g.Authorize(httptest.NewRecorder(), r); !errors.Is(err, tickets.ErrUnavailable) {
		t.Fatalf("bearer ticket with the store down: %v", err)
	}
	r = httptest.NewRequest("GET", "https://gw/sandboxes/s1/app/?ticket="+fresh, nil)
	r.AddCookie(session)
	if grant, err := g.Authorize(httptest.NewRecorder(), r); err != nil || grant.Via != "session" {
		t.Fatalf("session with the store down: %+v %v", grant, err)
	}
	rec := httptest.NewRecorder()
	WriteTicketStoreUnavailable(rec, "req-1")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), CodeTicketStoreUnavailable) {
		t.Fatalf("answer: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}
