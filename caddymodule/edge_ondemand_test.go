package caddymodule_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/routes/tickets"
)

// startPebble runs Debian's pebble ACME server on free loopback ports, validating nothing
// (PEBBLE_VA_ALWAYS_VALID), and returns its directory URL, the certificate of its listener and its log (one
// "Added order" line per ACME order it was sent).
func startPebble(t *testing.T) (dirURL, rootPath string, logs *testenv.SyncBuffer) {
	t.Helper()
	if _, err := exec.LookPath("pebble"); err != nil {
		t.Skip("pebble is not installed (scripts/prereqs.sh pebble)")
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	out, err := exec.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
		"-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":           listen,
		"managementListenAddress": fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		"certificate":             cert, "privateKey": key,
		"httpPort": testenv.FreePort(t), "tlsPort": testenv.FreePort(t),
	}}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("pebble", "-config", cfgPath)
	cmd.Env = append(os.Environ(), "PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_WFE_NONCEREJECT=0")
	logs = &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pebble log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not listen on %s", listen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "https://" + listen + "/dir", cert, logs
}

// TestEdgeOnDemandTLSOnlyForLiveSandboxes: with tls.permission.sandbox, Caddy obtains a certificate from an ACME CA
// for a live sandbox's name (both subdomain forms) and refuses the handshake for any other name without asking
// the CA.
func TestEdgeOnDemandTLSOnlyForLiveSandboxes(t *testing.T) {
	testenv.Integration(t)
	dirURL, pebbleRoot, _ := startPebble(t)
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
			cert_burst 1
			cert_interval 1h
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
	respond "sandgate"
}
`, httpPort, httpsPort, dirURL, pebbleRoot, ns, image)
	g := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{})
	e := &edgeGateway{g: g}
	id := e.createSandbox(t)

	handshake := func(name string) (*tls.ConnectionState, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		d := tls.Dialer{Config: &tls.Config{ServerName: name, InsecureSkipVerify: true}} // pebble's roots are random per run
		c, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		st := c.(*tls.Conn).ConnectionState()
		return &st, nil
	}
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
	testenv.Integration(t)
	dirURL, pebbleRoot, pebbleLog := startPebble(t)
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgtlsp")
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
			ports_cache 1s
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
	sandbox_ticket app {
		base_domains sb.localhost
	}
	sandbox_proxy app
}
`, httpPort, httpsPort, dirURL, pebbleRoot, ns, image)
	g := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{Env: []string{tickets.EnvSecret + "=" + edgeSecret}})
	e := &edgeGateway{g: g}
	id := e.createSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()

	handshake := func(name string) (*tls.ConnectionState, error) {
		hctx, hcancel := context.WithTimeout(ctx, 60*time.Second)
		defer hcancel()
		d := tls.Dialer{Config: &tls.Config{ServerName: name, InsecureSkipVerify: true}} // pebble's roots are random per run
		c, err := d.DialContext(hctx, "tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		st := c.(*tls.Conn).ConnectionState()
		return &st, nil
	}
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
