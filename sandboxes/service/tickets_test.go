package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/tickets"
)

// TestTicketMinter checks that a ticket from the API opens exactly the route the edge's verifier expects.
func TestTicketMinter(t *testing.T) {
	secret := []byte("api-ticket-secret-0123456789abcdef0123")
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	ver, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	urls, err := tickets.ParseURLs("https://gw.example.com/", "")
	if err != nil {
		t.Fatal(err)
	}
	b := NewTicketMinter(iss, urls)
	tk, err := b.Issue(context.Background(), TicketRequest{SandboxID: "sandbox-abc", Owner: "alice", Scope: "vnc", Write: true, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tk.URL, "https://gw.example.com/sandboxes/sandbox-abc/vnc/?ticket=") {
		t.Errorf("url %q", tk.URL)
	}
	if _, err := ver.Verify(tk.Ticket, tickets.Expect{SandboxID: "sandbox-abc", Kind: tickets.KindCDP, Permission: tickets.PermRead}); err == nil {
		t.Errorf("a vnc ticket opened cdp")
	}
	c, err := ver.Verify(tk.Ticket, tickets.Expect{SandboxID: "sandbox-abc", Kind: tickets.KindVNC, Permission: tickets.PermWrite})
	if err != nil || c.Subject != "alice" {
		t.Fatalf("verify: %+v %v", c, err)
	}
	if _, err := ver.Verify(tk.Ticket, tickets.Expect{SandboxID: "sandbox-abc", Kind: tickets.KindVNC}); err == nil {
		t.Errorf("a ticket was accepted twice")
	}
	if _, err := b.Issue(context.Background(), TicketRequest{SandboxID: "sandbox-abc", Scope: "root"}); err == nil {
		t.Errorf("unknown scope accepted")
	}
}

// TestTicketMinterURLs: apps open on the content origin when one is configured, CDP as the one WebSocket
// connectOverCDP opens, the pages on the gateway's origin; without a base for the kind there is no URL.
func TestTicketMinterURLs(t *testing.T) {
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte("api-ticket-secret-0123456789abcdef0123")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gateway, content, scope, want string
	}{
		{"https://localhost:8443", "https://sandbox.localhost:8443", "app", "https://sb-1.sandbox.localhost:8443/?ticket="},
		{"https://localhost:8443", "https://sandbox.localhost:8443", "terminal", "https://localhost:8443/sandboxes/sb-1/terminal/?ticket="},
		{"https://localhost:8443", "", "app", "https://localhost:8443/sandboxes/sb-1/app/?ticket="},
		{"https://localhost:8443", "", "cdp", "wss://localhost:8443/sandboxes/sb-1/cdp?ticket="},
		{"http://gw.internal", "", "cdp", "ws://gw.internal/sandboxes/sb-1/cdp?ticket="},
		{"", "https://sandbox.example.com", "app", "https://sb-1.sandbox.example.com/?ticket="},
		{"", "https://sandbox.example.com", "vnc", ""},
		{"", "", "app", ""},
	} {
		urls, err := tickets.ParseURLs(tc.gateway, tc.content)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := NewTicketMinter(iss, urls).Issue(context.Background(),
			TicketRequest{SandboxID: "sb-1", Scope: tc.scope, Write: true, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if (tc.want == "" && tk.URL != "") || !strings.HasPrefix(tk.URL, tc.want) {
			t.Errorf("%s %q %q: url %q, want %q...", tc.scope, tc.gateway, tc.content, tk.URL, tc.want)
		}
	}
	for _, bad := range []string{"sandbox.localhost", "ftp://x", "https://x/path", "https://x/?q=1", "https://u@x"} {
		if _, err := tickets.ParseURLs("", bad); err == nil {
			t.Errorf("content base %q accepted", bad)
		}
	}
}

// TestTicketMinterFor: no secret is no minter (the routes off); a short secret or a bad URL is refused; a good
// configuration mints.
func TestTicketMinterFor(t *testing.T) {
	if m, err := TicketMinterFor("", "", ""); m != nil || err != nil {
		t.Fatalf("no secret: %v, %v", m, err)
	}
	if _, err := TicketMinterFor("short", "", ""); err == nil {
		t.Fatal("a short secret passed")
	}
	if _, err := TicketMinterFor(strings.Repeat("k", 32), "gw.example.com", ""); err == nil {
		t.Fatal("a base URL without a scheme passed")
	}
	m, err := TicketMinterFor(strings.Repeat("k", 32), "https://gw.example.com", "")
	if err != nil || m == nil {
		t.Fatalf("%v, %v", m, err)
	}
}
