package caddymodule_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// startOnDemand runs the gateway with a sandboxes app (profile py, app port 3000) and an https:// site that
// obtains its certificates on demand from pebble, for the names `permission sandbox sb.localhost { permission }`
// allows; site is the rest of that site's body.
func startOnDemand(t *testing.T, permission, site string, opts testenv.GatewayOptions) *onDemandEdge {
	t.Helper()
	testenv.Integration(t)
	pebble := testenv.StartPebble(t)
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgtls")
	testenv.RemoveNamespace(t, ns)
	httpsPort, httpPort := testenv.FreePort(t), testenv.FreePort(t)
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	skip_install_trust
	acme_ca %s
	acme_ca_root %s
	on_demand_tls {
		permission sandbox sb.localhost {
%s
		}
	}
	sandboxes {
		namespace %s
		profile py {
			image %s
			memory 256m
			capabilities shell
			app_port 3000
		}
	}
}

https:// {
	tls {
		on_demand
	}
%s
}
`, httpPort, httpsPort, pebble.DirURL, pebble.RootPath, permission, ns, image, site)
	return &onDemandEdge{g: testenv.StartGateway(t, caddyfile, opts), pebble: pebble, httpsPort: httpsPort}
}

// onDemandEdge is the gateway startOnDemand runs, the pebble it asks for certificates, and its HTTPS port.
type onDemandEdge struct {
	g         *testenv.Gateway
	pebble    *testenv.Pebble
	httpsPort int
}

// handshake is a TLS handshake with the site for name (see testenv.Handshake).
func (o *onDemandEdge) handshake(ctx context.Context, name string) (*tls.ConnectionState, error) {
	return testenv.Handshake(ctx, fmt.Sprintf("127.0.0.1:%d", o.httpsPort), name)
}

// TestEdgeOnDemandTLSOnlyForLiveSandboxes: with tls.permission.sandbox, Caddy obtains a certificate from an ACME CA
// for a live sandbox's name (both subdomain forms) and refuses the handshake for any other name without asking
// the CA.
func TestEdgeOnDemandTLSOnlyForLiveSandboxes(t *testing.T) {
	o := startOnDemand(t, "\t\t\tcert_burst 1\n\t\t\tcert_interval 1h", "\trespond \"sandgate\"", testenv.GatewayOptions{})
	g := o.g
	e := &edgeGateway{g: g}
	id := e.createSandbox(t)

	handshake := func(name string) (*tls.ConnectionState, error) { return o.handshake(context.Background(), name) }
	// The budget is one new name per sandbox per hour: the first name of each sandbox is issued, a second new name of
	// the same sandbox (its declared app port) is refused, and another sandbox is unaffected.
	other := e.createSandbox(t)
	for _, name := range []string{id + ".sb.localhost", "3000-" + other + ".sb.localhost"} {
		st, err := handshake(name)
		if err != nil {
			t.Fatalf("handshake for live sandbox name %s: %v", name, err)
		}
		leaf := st.PeerCertificates[0]
		if !strings.Contains(leaf.Issuer.CommonName, "Pebble") || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != name {
			t.Fatalf("certificate for %s: issuer %q, names %v", name, leaf.Issuer.CommonName, leaf.DNSNames)
		}
	}
	// Non-canonical spellings of the live sandbox and undeclared ports are refused too (each would be an ACME order).
	for _, name := range []string{"sandbox-000000000000.sb.localhost", "random-name.sb.localhost", "www.example.com", "a." + id + ".sb.localhost",
		"03000-" + id + ".sb.localhost", "00001-" + id + ".sb.localhost", "1-" + id + ".sb.localhost", "3001-" + id + ".sb.localhost",
		"3000-" + id + ".sb.localhost"} {
		if _, err := handshake(name); err == nil {
			t.Fatalf("handshake for %s succeeded; on-demand TLS must refuse it", name)
		}
	}
	if logs := g.Logs(); strings.Count(logs, "certificate obtained successfully") != 2 {
		t.Fatalf("want exactly two issuances, log:\n%s", logs)
	}
}

// TestEdgeOnDemandTLSForListeningPort: a certificate is issued for a port nothing declared once something listens
// on it in the sandbox. Against pebble and our image: before `python3 -m http.server 5173` starts the name is
// refused; once it listens the gateway obtains 5173-<id>.<base> and the HTTPS request through the gateway reaches
// the server. A port nothing listens on, the agent's own port, a non-canonical spelling, an unknown sandbox and a
// flood of random names get no certificate (the handshake fails), and pebble saw exactly one order.
func TestEdgeOnDemandTLSForListeningPort(t *testing.T) {
	o := startOnDemand(t, "\t\t\tports_cache 1s", "\tsandbox_ticket app {\n\t\tbase_domains sb.localhost\n\t}\n\tsandbox_proxy app",
		testenv.GatewayOptions{Env: []string{tickets.EnvSecret + "=" + edgeSecret}})
	g, pebbleLog, httpsPort := o.g, o.pebble.Logs, o.httpsPort
	e := &edgeGateway{g: g}
	id := e.createSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()

	handshake := func(name string) (*tls.ConnectionState, error) { return o.handshake(ctx, name) }
	name := "5173-" + id + ".sb.localhost"
	if _, err := handshake(name); err == nil {
		t.Fatalf("handshake for %s succeeded before anything listens on 5173", name)
	}

	// The sandbox's own code starts a server on a port its profile does not declare.
	var agent *agentapi.Client
	for agent == nil {
		addr, token, err := g.TryAgent(id)
		if err == nil {
			agent = agentapi.NewClientFor(addr, token, nil)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no agent for %s: %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err := agent.Exec(ctx, agentapi.ExecRequest{Argv: []string{"python3", "-m", "http.server", "5173"}, YieldMS: 200})
	if err != nil || res.Status != agentapi.StatusRunning {
		t.Fatalf("starting http.server: %v %+v", err, res)
	}
	for {
		ports, err := agent.Ports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ports.Ports, func(p agentapi.ListeningPort) bool { return p.Port == 5173 && p.Proxied() }) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("5173 never listened: %+v", ports)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The gateway's listing from the refused handshake may be up to ports_cache old: retry until it is fresh.
	var st *tls.ConnectionState
	for {
		if st, err = handshake(name); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("handshake for %s once 5173 listens: %v\ngateway log:\n%s", name, err, g.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	leaf := st.PeerCertificates[0]
	if !strings.Contains(leaf.Issuer.CommonName, "Pebble") || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != name {
		t.Fatalf("certificate for %s: issuer %q, names %v", name, leaf.Issuer.CommonName, leaf.DNSNames)
	}

	// The HTTPS request through the gateway, with an app ticket, answers from the server in the sandbox.
	issuer, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(edgeSecret)})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := issuer.Issue(tickets.IssueRequest{SandboxID: id, Kind: tickets.KindApp, Permission: tickets.PermRead, Subject: "test"})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", httpsPort))
		},
	}}
	resp, err := client.Get(fmt.Sprintf("https://%s:%d/?ticket=%s", name, httpsPort, url.QueryEscape(tk.Token)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Directory listing for /") ||
		resp.TLS == nil || resp.TLS.PeerCertificates[0].DNSNames[0] != name {
		t.Fatalf("GET through the gateway: %d %q", resp.StatusCode, body)
	}

	for _, denied := range []string{
		"5174-" + id + ".sb.localhost",               // nothing listens
		"7777-" + id + ".sb.localhost",               // the agent's own port: the proxy refuses it
		"05173-" + id + ".sb.localhost",              // not the canonical spelling
		"5173-sandbox-000000000000.sb.localhost",     // no such sandbox
		"5173-" + id + "x.sb.localhost",              // no such sandbox either
		"5173-" + id + ".other.localhost",            // not under the base domain
		fmt.Sprintf("%d-%s.sb.localhost", 40000, id), // nothing listens
	} {
		if _, err := handshake(denied); err == nil {
			t.Fatalf("handshake for %s succeeded; on-demand TLS must refuse it", denied)
		}
	}
	// A flood of random names for the live sandbox and for made-up ones: every handshake fails (the agent's
	// listing answers from the policy's cache; sandboxroute.TestCertPolicyHammeringCostsOneAgentCall counts its
	// calls) and none reaches pebble.
	var wg sync.WaitGroup
	var accepted atomic.Int32
	for i := range 64 {
		wg.Go(func() {
			name := fmt.Sprintf("%d-%s.sb.localhost", 20000+i, id)
			if i%2 == 1 {
				name = fmt.Sprintf("%d-sandbox-%012x.sb.localhost", 20000+i, i)
			}
			if _, err := handshake(name); err == nil {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d handshakes for random names succeeded", n)
	}
	if n := strings.Count(pebbleLog.String(), "Added order"); n != 1 {
		t.Fatalf("pebble saw %d orders, want exactly the one for %s; pebble log:\n%s", n, name, pebbleLog.String())
	}
	if n := strings.Count(g.Logs(), "certificate obtained successfully"); n != 1 {
		t.Fatalf("want exactly one issuance, gateway log:\n%s", g.Logs())
	}
}
