package caddymodule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/sandgate/sandgate/routes/tickets"
	"github.com/sandgate/sandgate/sandboxes"
)

// fakeNames is a Manager with live sandboxes (id -> profile) and profiles.
type fakeNames struct {
	live     map[string]string
	profiles map[string]sandboxes.Profile
}

func (f fakeNames) Get(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	prof, ok := f.live[id]
	if !ok {
		return nil, sandboxes.Errorf(sandboxes.CodeNotFound, "no sandbox %s", id)
	}
	return &sandboxes.Sandbox{ID: id, Profile: prof}, nil
}

func (f fakeNames) Profile(id string) (sandboxes.Profile, bool) {
	p, ok := f.profiles[id]
	return p, ok
}

// TestSandboxPermission: only canonical names of live sandboxes, with declared ports, are approved; every other
// spelling of the same sandbox is refused before an ACME order.
func TestSandboxPermission(t *testing.T) {
	names := fakeNames{
		live: map[string]string{"sandbox-1": "web"},
		profiles: map[string]sandboxes.Profile{"web": {ID: "web", AppPort: 3000,
			Services: []sandboxes.Service{{Name: "api", Port: 8080}}}},
	}
	p := &SandboxPermission{BaseDomains: []string{"sb.example.com"}, sandboxes: names, limit: newNameLimiter(100, time.Minute)}
	tests := []struct {
		name string
		ok   bool
	}{
		{"sandbox-1.sb.example.com", true},
		{"3000-sandbox-1.sb.example.com", true},
		{"8080-sandbox-1.sb.example.com", true},
		{"SANDBOX-1.SB.EXAMPLE.COM", true},
		{"sandbox-1.sb.example.com.", true},
		{"03000-sandbox-1.sb.example.com", false},
		{"00001-sandbox-1.sb.example.com", false},
		{"1-sandbox-1.sb.example.com", false},
		{"3001-sandbox-1.sb.example.com", false},
		{"65535-sandbox-1.sb.example.com", false},
		{"sandbox-2.sb.example.com", false},
		{"x.sandbox-1.sb.example.com", false},
		{"sb.example.com", false},
		{"sandbox-1.example.com", false},
		{"www.google.com", false},
	}
	for _, tc := range tests {
		err := p.CertificateAllowed(context.Background(), tc.name)
		if tc.ok != (err == nil) {
			t.Errorf("CertificateAllowed(%q) = %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, caddytls.ErrPermissionDenied) {
			t.Errorf("CertificateAllowed(%q) does not wrap ErrPermissionDenied: %v", tc.name, err)
		}
	}
}

// TestSandboxPermissionRateLimit: a sandbox gets at most the burst of new names, then one per interval; names it
// already had stay approved, and another sandbox is unaffected.
func TestSandboxPermissionRateLimit(t *testing.T) {
	l := newNameLimiter(2, time.Minute)
	now := time.Now()
	for i, tc := range []struct {
		id, name string
		at       time.Duration
		ok       bool
	}{
		{"a", "a1", 0, true}, {"a", "a2", 0, true}, {"a", "a3", 0, false}, {"a", "a1", 0, true},
		{"b", "b1", 0, true}, {"a", "a3", 30 * time.Second, false}, {"a", "a3", 61 * time.Second, true},
		{"a", "a4", 62 * time.Second, false},
	} {
		if got := l.allow(tc.id, tc.name, now.Add(tc.at)); got != tc.ok {
			t.Errorf("%d: allow(%s, %s) = %v", i, tc.id, tc.name, got)
		}
	}
}

func TestSandboxProxyCaddyfileErrors(t *testing.T) {
	for _, src := range []string{
		"sandbox_proxy shell",
		"sandbox_proxy port 0",
		"sandbox_proxy port x",
		"sandbox_proxy app extra",
		"sandbox_proxy app app",
		"sandbox_proxy terminal port 3000",
		"sandbox_proxy app {\n shared_origin yes\n}",
		"sandbox_proxy app {\n max_message lots\n}",
		"sandbox_proxy app {\n start_timeout -1s\n}",
	} {
		if _, err := readProxyOptions(caddyfile.NewTestDispenser(src)); err == nil {
			t.Errorf("%q parsed", src)
		}
	}
	opts, err := readProxyOptions(caddyfile.NewTestDispenser("sandbox_proxy port 8080 {\n rewrite_host gw\n allow_browser_close\n header_up X-A b\n}"))
	if err != nil || opts.port != 8080 || opts.rewriteHost != "gw" || !opts.allowBrowserClose || len(opts.kinds) != 1 {
		t.Fatalf("opts = %+v, %v", opts, err)
	}
}

func TestSandboxTicketSecretRequired(t *testing.T) {
	for _, secret := range []string{"short", "{env.SANDGATE_EDGE_UNSET_FOR_TEST}"} {
		h := &SandboxTicket{Secret: secret}
		err := h.Provision(testContext(t))
		if err == nil || !strings.Contains(err.Error(), "at least 32") {
			t.Errorf("secret %q: %v", secret, err)
		}
	}
	h := &SandboxTicket{Secret: strings.Repeat("k", 32), Kind: "app", BaseDomains: []string{".SB.Example.com."}}
	if err := h.Provision(testContext(t)); err != nil {
		t.Fatal(err)
	}
	defer h.Cleanup()
	if h.gate.BaseDomains[0] != "sb.example.com" || h.gate.SessionLifetime == 0 {
		t.Fatalf("gate = %+v", h.gate)
	}
	// A second handler with the same secret (another route, or the next config during a reload) shares the spent
	// nonces, even with other settings; a larger replay_cache grows the shared store.
	iss, _ := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(strings.Repeat("k", 32))})
	tk, _ := iss.Issue(tickets.IssueRequest{SandboxID: "s", Kind: tickets.KindApp})
	want := tickets.Expect{SandboxID: "s", Kind: tickets.KindApp}
	if _, err := h.gate.Verifier.Verify(tk.Token, want); err != nil {
		t.Fatal(err)
	}
	h2 := &SandboxTicket{Secret: strings.Repeat("k", 32), Leeway: caddy.Duration(time.Second), ReplayCache: tickets.DefaultReplayCacheSize * 2}
	if err := h2.Provision(testContext(t)); err != nil {
		t.Fatal(err)
	}
	defer h2.Cleanup()
	if _, err := h2.gate.Verifier.Verify(tk.Token, want); err == nil {
		t.Fatal("a ticket spent under one handler passed another handler of the same secret")
	}
	pooled, ok := spentNonces.References(h.poolKey)
	if !ok || pooled != 2 {
		t.Fatalf("pool references = %d, %v", pooled, ok)
	}
}

func testContext(t *testing.T) caddy.Context {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}
