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

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/tickets"
)

// oneSandbox is a Manager holding one live, idle sandbox of a profile with app port 3000.
type oneSandbox struct{}

func (oneSandbox) Exists(id string) bool { return id == "sandbox-1" }
func (oneSandbox) Get(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	if id != "sandbox-1" {
		return nil, sandboxes.Errorf(sandboxes.CodeNotFound, "no sandbox %s", id)
	}
	return &sandboxes.Sandbox{ID: id, Profile: "web"}, nil
}
func (oneSandbox) Profile(id string) (sandboxes.Profile, bool) {
	return sandboxes.Profile{ID: "web", AppPort: 3000}, id == "web"
}
func (oneSandbox) Resolve(string) (sandboxes.Target, bool) { return sandboxes.Target{}, false }

// TestSandboxPermission: the Caddy module answers with the policy's decision (sandboxroute.TestCertPolicy holds
// the cases), a refusal wrapping caddytls.ErrPermissionDenied and naming why.
func TestSandboxPermission(t *testing.T) {
	policy, err := sandboxroute.NewCertPolicy(sandboxroute.CertPolicyConfig{BaseDomains: []string{"sb.example.com"}, Sandboxes: oneSandbox{}})
	if err != nil {
		t.Fatal(err)
	}
	p := &SandboxPermission{policy: policy}
	for _, name := range []string{"sandbox-1.sb.example.com", "3000-sandbox-1.sb.example.com"} {
		if err := p.CertificateAllowed(context.Background(), name); err != nil {
			t.Errorf("CertificateAllowed(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"03000-sandbox-1.sb.example.com", "5173-sandbox-1.sb.example.com", "sandbox-2.sb.example.com", "www.google.com"} {
		err := p.CertificateAllowed(context.Background(), name)
		var denied *sandboxroute.CertDenied
		if !errors.Is(err, caddytls.ErrPermissionDenied) || !errors.As(err, &denied) {
			t.Errorf("CertificateAllowed(%q) = %v, want ErrPermissionDenied with a *CertDenied", name, err)
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
	h2 := &SandboxTicket{Secret: strings.Repeat("k", 32), verifierSettings: verifierSettings{Leeway: caddy.Duration(time.Second), ReplayCache: tickets.DefaultReplayCacheSize * 2}}
	if err := h2.Provision(testContext(t)); err != nil {
		t.Fatal(err)
	}
	defer h2.Cleanup()
	if _, err := h2.gate.Verifier.Verify(tk.Token, want); err == nil {
		t.Fatal("a ticket spent under one handler passed another handler of the same secret")
	}
	pooled, ok := spentNonces.p.References(h.poolKey)
	if !ok || pooled != 2 {
		t.Fatalf("pool references = %d, %v", pooled, ok)
	}
}

func testContext(t *testing.T) caddy.Context {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

func TestSandboxPermissionCaddyfileErrors(t *testing.T) {
	for _, src := range []string{
		"sandbox",
		"sandbox sb.example.com {\n cert_burst 0\n}",
		"sandbox sb.example.com {\n cert_interval soon\n}",
		"sandbox sb.example.com {\n ports_cache -1s\n}",
		"sandbox sb.example.com {\n ports_cache\n}",
		"sandbox sb.example.com {\n listening yes\n}",
	} {
		if err := new(SandboxPermission).UnmarshalCaddyfile(caddyfile.NewTestDispenser(src)); err == nil {
			t.Errorf("%q parsed", src)
		}
	}
}
