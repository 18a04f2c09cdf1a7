package pages

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef-test")

type fixture struct {
	h      *Handler
	m      *sandboxes.Manager
	engine *sandboxestest.Engine
	// alice and bob are alice's and bob's sandboxes, ready: the ids the Manager gave them.
	alice, bob string
	issuer     *tickets.Issuer
}

func newFixture(t *testing.T, assets map[string]string) *fixture {
	t.Helper()
	return newFixtureWith(t, assets, nil)
}

// newFixtureWith is newFixture with edit applied to the handler's configuration before it is built; the
// configuration's service runs over m, the real Manager over sandboxestest's engine.
func newFixtureWith(t *testing.T, assets map[string]string, edit func(c *Config, m *sandboxes.Manager)) *fixture {
	t.Helper()
	v, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := NewStaticKeys([]service.KeyConfig{{Key: "key-alice", Owner: "alice"}, {Key: "key-root", Owner: "root", Admin: true}})
	if err != nil {
		t.Fatal(err)
	}
	// A container that dies fails its sandbox at once (crash limit -1): the next start answers container_died.
	m, engine := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{
		{ID: "base", Image: "img", Capabilities: []string{sandboxes.CapShell}, CrashLimit: -1},
		{ID: "isolated", Image: "img", Runtime: sandboxes.RuntimeGVisor}}})
	f := &fixture{m: m, engine: engine, issuer: iss}
	f.alice, f.bob = f.create(t, "alice"), f.create(t, "bob")
	agents := service.NewAgentClient(nil)
	cfg := Config{Verifier: v, Issuer: iss, Keys: keys,
		Service: service.New(service.Config{Sandboxes: m, Agent: agents, Streamer: agents})}
	if assets != nil {
		fs := fstest.MapFS{}
		for k, body := range assets {
			fs[k] = &fstest.MapFile{Data: []byte(body)}
		}
		cfg.Assets = fs
	}
	if edit != nil {
		edit(&cfg, m)
	}
	if f.h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// create makes a sandbox of owner's on the base profile and waits for it to be ready.
func (f *fixture) create(t *testing.T, owner string) string {
	t.Helper()
	sb, err := f.m.Create(t.Context(), sandboxes.CreateRequest{Owner: owner, Profile: "base"})
	if err != nil {
		t.Fatal(err)
	}
	sandboxestest.WaitStatus(t, f.m, sb.ID, sandboxes.StatusReady)
	return sb.ID
}

// exists says whether sandbox id is still the Manager's.
func (f *fixture) exists(t *testing.T, id string) bool {
	t.Helper()
	_, err := f.m.Get(t.Context(), id)
	var se *sandboxes.Error
	if err != nil && !(errors.As(err, &se) && se.Code == sandboxes.CodeNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func (f *fixture) do(t *testing.T, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	if !f.h.Handles(r) {
		t.Fatalf("%s %s: not handled by the pages", r.Method, r.URL)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func (f *fixture) ticket(t *testing.T, id string, kind tickets.Kind, perm tickets.Permission) string {
	t.Helper()
	tk, err := f.issuer.Issue(tickets.IssueRequest{SandboxID: id, Kind: kind, Permission: perm})
	if err != nil {
		t.Fatal(err)
	}
	return tk.Token
}

// login logs in with key and returns the console cookie and CSRF token.
func (f *fixture) login(t *testing.T, key string) (*http.Cookie, string) {
	t.Helper()
	r := httptest.NewRequest("POST", "https://gw.test/console/login", strings.NewReader(url.Values{"api_key": {key}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "https://gw.test")
	w := f.do(t, r)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	var ck *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == ConsoleCookie {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" {
		t.Fatalf("console cookie: %+v", ck)
	}
	if strings.Contains(ck.Value, key) {
		t.Fatal("the cookie carries the API key")
	}
	r = httptest.NewRequest("GET", "https://gw.test/console/", nil)
	r.AddCookie(ck)
	w = f.do(t, r)
	body := w.Body.String()
	if strings.Contains(body, key) {
		t.Fatal("the console page contains the API key")
	}
	_, rest, ok := strings.Cut(body, `name="csrf-token" content="`)
	if !ok {
		t.Fatalf("no CSRF token in the console page:\n%s", body)
	}
	csrf, _, _ := strings.Cut(rest, `"`)
	return ck, csrf
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	f := newFixture(t, builtAssets())
	ck, _ := f.login(t, "key-alice")
	cases := []struct {
		name string
		req  func() *http.Request
	}{
		{"login page", func() *http.Request { return httptest.NewRequest("GET", "https://gw.test/console/", nil) }},
		{"console", func() *http.Request {
			r := httptest.NewRequest("GET", "https://gw.test/console/", nil)
			r.AddCookie(ck)
			return r
		}},
		{"terminal refused", func() *http.Request {
			return httptest.NewRequest("GET", "https://gw.test/sandboxes/"+f.alice+"/terminal/", nil)
		}},
		{"desktop refused", func() *http.Request {
			return httptest.NewRequest("GET", "https://gw.test/sandboxes/"+f.alice+"/vnc/", nil)
		}},
		{"static asset", func() *http.Request {
			return httptest.NewRequest("GET", "https://gw.test/_sandgate/static/pages.css", nil)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := f.do(t, c.req())
			h := w.Header()
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"script-src 'self'", "connect-src 'self' wss:", "frame-ancestors 'none'", "default-src 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("CSP allows inline code: %q", csp)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("headers: %v", h)
			}
			if strings.Contains(w.Body.String(), "<script>") || strings.Contains(w.Body.String(), " style=") {
				t.Errorf("inline script or style in the page")
			}
		})
	}
}

func TestConsoleCSRFRefusal(t *testing.T) {
	f := newFixture(t, nil)
	ck, csrf := f.login(t, "key-alice")
	cases := []struct {
		name        string
		csrf        string
		origin      string
		fetchSite   string
		wantStatus  int
		wantDeleted bool
	}{
		{"no token", "", "https://gw.test", "same-origin", http.StatusForbidden, false},
		{"wrong token", "nope", "https://gw.test", "same-origin", http.StatusForbidden, false},
		{"foreign origin", csrf, "https://evil.test", "", http.StatusForbidden, false},
		{"cross-site fetch", csrf, "", "cross-site", http.StatusForbidden, false},
		{"same-site but not same-origin", csrf, "", "same-site", http.StatusForbidden, false},
		{"null origin without fetch metadata", csrf, "null", "", http.StatusForbidden, false},
		{"good", csrf, "https://gw.test", "same-origin", http.StatusNoContent, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("DELETE", "https://gw.test/console/api/sandboxes/"+f.alice, nil)
			r.AddCookie(ck)
			if c.csrf != "" {
				r.Header.Set(CSRFHeader, c.csrf)
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.fetchSite != "" {
				r.Header.Set("Sec-Fetch-Site", c.fetchSite)
			}
			w := f.do(t, r)
			if w.Code != c.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, c.wantStatus, w.Body)
			}
			if got := !f.exists(t, f.alice); got != c.wantDeleted {
				t.Fatalf("deleted=%v, want %v", got, c.wantDeleted)
			}
		})
	}
}

func TestConsoleLoginRefusals(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct {
		name, key, origin string
		want              int
	}{
		{"wrong key", "nope", "https://gw.test", http.StatusUnauthorized},
		{"empty key", "", "https://gw.test", http.StatusUnauthorized},
		{"cross-site login", "key-alice", "https://evil.test", http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "https://gw.test/console/login", strings.NewReader(url.Values{"api_key": {c.key}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Origin", c.origin)
			w := f.do(t, r)
			if w.Code != c.want || len(w.Result().Cookies()) != 0 {
				t.Fatalf("status %d cookies %v, want %d and none", w.Code, w.Result().Cookies(), c.want)
			}
		})
	}
}

func TestConsoleSeesOnlyOwnSandboxes(t *testing.T) {
	f := newFixture(t, nil)
	ck, csrf := f.login(t, "key-alice")
	r := httptest.NewRequest("GET", "https://gw.test/console/api/sandboxes", nil)
	r.AddCookie(ck)
	w := f.do(t, r)
	var list struct {
		Sandboxes []sandboxView `json:"sandboxes"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != f.alice {
		t.Fatalf("alice sees %+v", list.Sandboxes)
	}
	// Someone else's sandbox answers like a missing one, and is not deleted.
	r = httptest.NewRequest("DELETE", "https://gw.test/console/api/sandboxes/"+f.bob, nil)
	r.AddCookie(ck)
	r.Header.Set(CSRFHeader, csrf)
	if w := f.do(t, r); w.Code != http.StatusNotFound || !f.exists(t, f.bob) || !f.exists(t, f.alice) {
		t.Fatalf("deleting bob's sandbox as alice: %d, bob's kept %v, alice's kept %v", w.Code, f.exists(t, f.bob), f.exists(t, f.alice))
	}
	// Pause and resume: one's own sandbox only.
	for _, tc := range []struct {
		id, action string
		code       int
		status     sandboxes.Status
	}{
		{f.bob, "pause", http.StatusNotFound, sandboxes.StatusReady},
		{f.alice, "pause", http.StatusOK, sandboxes.StatusPaused},
		{f.alice, "resume", http.StatusOK, sandboxes.StatusReady},
	} {
		r = httptest.NewRequest("POST", "https://gw.test/console/api/sandboxes/"+tc.id+"/"+tc.action, nil)
		r.AddCookie(ck)
		r.Header.Set(CSRFHeader, csrf)
		if w := f.do(t, r); w.Code != tc.code {
			t.Fatalf("%s %s: %d %s", tc.action, tc.id, w.Code, w.Body)
		}
		if got, _ := f.m.Get(t.Context(), tc.id); tc.code == http.StatusOK && got.Status != tc.status {
			t.Fatalf("%s %s: status %s", tc.action, tc.id, got.Status)
		}
	}
	// Open mints a ticket URL for the page.
	r = httptest.NewRequest("POST", "https://gw.test/console/api/sandboxes/"+f.alice+"/open", strings.NewReader(`{"kind":"terminal"}`))
	r.AddCookie(ck)
	r.Header.Set(CSRFHeader, csrf)
	r.Header.Set("Content-Type", "application/json")
	w = f.do(t, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `/sandboxes/`+f.alice+`/terminal/?ticket=`) {
		t.Fatalf("open: %d %s", w.Code, w.Body)
	}
}

func TestMissingAssets503(t *testing.T) {
	// Committed files only, as in a fresh clone built without `make assets`.
	f := newFixture(t, map[string]string{"static/pages.css": "body{}", "static/terminal.js": "", "static/desktop.js": ""})
	r := httptest.NewRequest("GET", "https://gw.test/_sandgate/vendor/xterm/xterm.mjs", nil)
	w := f.do(t, r)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "assets not built: run make assets") {
		t.Fatalf("vendor file: %d %q", w.Code, w.Body)
	}
	for _, kind := range []tickets.Kind{tickets.KindTerminal, tickets.KindVNC} {
		path := "/sandboxes/" + f.alice + "/" + string(kind) + "/"
		r = httptest.NewRequest("GET", "https://gw.test"+path+"?ticket="+f.ticket(t, f.alice, kind, tickets.PermWrite), nil)
		w = f.do(t, r)
		if w.Code != http.StatusSeeOther {
			t.Fatalf("%s with ticket: %d", kind, w.Code)
		}
		r = httptest.NewRequest("GET", "https://gw.test"+path, nil)
		for _, c := range w.Result().Cookies() {
			r.AddCookie(c)
		}
		w = f.do(t, r)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "assets not built: run make assets") {
			t.Fatalf("%s page: %d %q", kind, w.Code, w.Body)
		}
	}
	if w := f.do(t, httptest.NewRequest("GET", "https://gw.test/_sandgate/static/pages.css", nil)); w.Code != http.StatusOK {
		t.Fatalf("committed asset: %d", w.Code)
	}
	if w := f.do(t, httptest.NewRequest("GET", "https://gw.test/_sandgate/static/../templates/console.html", nil)); w.Code != http.StatusNotFound {
		t.Fatalf("template through assets: %d", w.Code)
	}
}

// builtAssets stands for a tree after `make assets`, so these tests do not depend on the generated directory.
func builtAssets() map[string]string {
	m := map[string]string{"static/pages.css": "", "static/terminal.js": "", "static/desktop.js": "", "static/console.js": ""}
	for _, n := range append(append([]string{}, terminalVendor...), desktopVendor...) {
		m[n] = "// vendor"
	}
	return m
}

func TestTerminalPageTickets(t *testing.T) {
	f := newFixture(t, builtAssets())
	path := "/sandboxes/" + f.alice + "/terminal/"
	tok := f.ticket(t, f.alice, tickets.KindTerminal, tickets.PermWrite)
	w := f.do(t, httptest.NewRequest("GET", "https://gw.test"+path+"?ticket="+tok, nil))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != path {
		t.Fatalf("ticket: %d -> %q", w.Code, w.Header().Get("Location"))
	}
	var session *http.Cookie
	for _, c := range w.Result().Cookies() {
		session = c
	}
	if session == nil || session.Path != "/sandboxes/"+f.alice+"/terminal" || !session.HttpOnly || !session.Secure {
		t.Fatalf("session cookie: %+v", session)
	}
	// The ticket is single-use.
	if w := f.do(t, httptest.NewRequest("GET", "https://gw.test"+path+"?ticket="+tok, nil)); w.Code != http.StatusUnauthorized ||
		!strings.Contains(w.Body.String(), "expired") {
		t.Fatalf("replayed ticket: %d %s", w.Code, w.Body)
	}
	// A ticket for another sandbox does not open this one.
	other := f.ticket(t, f.bob, tickets.KindTerminal, tickets.PermWrite)
	if w := f.do(t, httptest.NewRequest("GET", "https://gw.test"+path+"?ticket="+other, nil)); w.Code != http.StatusUnauthorized {
		t.Fatalf("foreign ticket: %d", w.Code)
	}
	r := httptest.NewRequest("GET", "https://gw.test"+path, nil)
	r.AddCookie(session)
	w = f.do(t, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `data-permission="write"`) {
		t.Fatalf("page: %d", w.Code)
	}
	// The probe after a dead container says container_died with its reason: the kernel's OOM killer kills it.
	if !f.engine.Die(f.alice, true) {
		t.Fatal("alice's sandbox has no running container")
	}
	sandboxestest.WaitStatus(t, f.m, f.alice, sandboxes.StatusFailed)
	r = httptest.NewRequest("GET", "https://gw.test"+path+"session?pty=p1", nil)
	r.AddCookie(session)
	w = f.do(t, r)
	if w.Code != http.StatusGone || !strings.Contains(w.Body.String(), `"container_died"`) || !strings.Contains(w.Body.String(), "oom") {
		t.Fatalf("probe of a dead sandbox: %d %s", w.Code, w.Body)
	}
	// Without the cookie the probe is 401 (the script's "ticket expired").
	w = f.do(t, httptest.NewRequest("GET", "https://gw.test"+path+"session?pty=p1", nil))
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("probe without session: %d", w.Code)
	}
	// Creating a session from another origin is refused.
	r = httptest.NewRequest("POST", "https://gw.test"+path+"session", strings.NewReader(`{}`))
	r.AddCookie(session)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", "https://evil.test")
	if w := f.do(t, r); w.Code != http.StatusForbidden {
		t.Fatalf("cross-origin session: %d", w.Code)
	}
}

func TestHandlesOnlyPages(t *testing.T) {
	f := newFixture(t, nil)
	for path, want := range map[string]bool{
		"/sandboxes/sb1/terminal/":          true,
		"/sandboxes/sb1/terminal/session":   true,
		"/sandboxes/sb1/terminal/ws":        false,
		"/sandboxes/sb1/vnc/":               true,
		"/sandboxes/sb1/vnc/websockify":     false,
		"/sandboxes/sb1/app/":               false,
		"/console/":                         true,
		"/_sandgate/static/terminal.js":     true,
		"/v1/sandboxes":                     false,
		"/sandboxes/sb1/terminal/../../etc": false,
	} {
		if got := f.h.Handles(httptest.NewRequest("GET", "https://gw.test"+path, nil)); got != want {
			t.Errorf("Handles(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestConsoleEventsFilteredByOwner(t *testing.T) {
	f := newFixture(t, nil)
	ck, _ := f.login(t, "key-alice")
	srv := httptest.NewServer(http.HandlerFunc(f.h.ServeHTTP))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/console/events", nil)
	req.AddCookie(ck)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	// The Manager's own events, in order: bob's new sandbox is created and becomes ready (his, not alice's), then
	// alice's sandbox is paused; alice's stream shows hers alone.
	bobs := f.create(t, "bob")
	if _, err := f.m.Pause(t.Context(), f.alice); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event: ") || strings.HasPrefix(line, "data: ") {
			got = append(got, line)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	if len(got) != 2 || got[0] != "event: paused" || !strings.Contains(got[1], `"sandbox_id":"`+f.alice+`"`) {
		t.Fatalf("alice's stream (bob's %s created before): %q", bobs, got)
	}
	// Closing the handler (config unload) ends the stream.
	f.h.Close()
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream outlived the handler")
	}
}

// downStore is the fleet's spent-ticket store when Redis does not answer.
type downStore struct{}

func (downStore) Spend(context.Context, string, string, time.Time, time.Duration) error {
	return tickets.Unavailable(errors.New("redis: connection refused"))
}

// TestPageTicketStoreDown: with the shared spent-ticket store down, a terminal link is refused (fail closed) with a
// 503 that tells the user to reload, not the "ticket expired" page: the ticket was not spent.
func TestPageTicketStoreDown(t *testing.T) {
	f := newFixture(t, builtAssets())
	down, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: testSecret, Spent: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := NewStaticKeys([]service.KeyConfig{{Key: "key-alice", Owner: "alice"}})
	h, err := New(Config{Verifier: down, Service: service.New(service.Config{Sandboxes: f.m}), Issuer: f.issuer, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	tok := f.ticket(t, f.alice, tickets.KindTerminal, tickets.PermWrite)
	w := f.do(t, httptest.NewRequest("GET", "https://gw.test/sandboxes/"+f.alice+"/terminal/?ticket="+tok, nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "Try again") {
		t.Fatalf("store down: %d %v\n%s", w.Code, w.Header(), w.Body)
	}
	if w.Header().Get("Content-Security-Policy") == "" {
		t.Fatal("the 503 page lacks the pages' security headers")
	}
}

// TestConsoleProfilesShowTheRuntime: the console's profile list says which runtime each profile's sandboxes run
// under, the engine's default named as runc, so the isolated profile can be told apart and chosen.
func TestConsoleProfilesShowTheRuntime(t *testing.T) {
	f := newFixture(t, nil)
	ck, _ := f.login(t, "key-alice")
	r := httptest.NewRequest("GET", "https://gw.test/console/api/profiles", nil)
	r.AddCookie(ck)
	w := f.do(t, r)
	var list struct {
		Profiles []profileView `json:"profiles"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != http.StatusOK {
		t.Fatalf("profiles: %d %s %v", w.Code, w.Body, err)
	}
	got := map[string]string{}
	for _, p := range list.Profiles {
		got[p.ID] = p.Runtime
	}
	if len(got) != 2 || got["base"] != "runc" || got["isolated"] != "runsc" {
		t.Fatalf("runtimes %v, want base runc and isolated runsc", got)
	}
}
