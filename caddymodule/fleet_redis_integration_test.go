package caddymodule_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

const fleetSecret = "fleet-secret-0123456789abcdef0123456789"

// fleetGateway is one gateway of a fleet: its process and the port of its HTTPS site.
type fleetGateway struct {
	g         *testenv.Gateway
	httpsPort int
	caddyfile string
}

// fleetCaddyfile is one gateway of a fleet sharing redis: certificates in `storage redis`, obtained from pebble for
// fleet.localhost, and spent tickets in sandbox_ticket's replay_redis. No `skip_install_trust` and no `tls
// internal`: either loads Caddy's local CA, whose first generation in a shared storage is not locked by Caddy
// (docs/kubernetes.md), and these gateways start at the same moment on an empty Redis. The site answers with the admitted sandbox.
// global and site are added to the global options and the site (gateway A's sandboxes and API).
func fleetCaddyfile(httpPort, httpsPort int, redisAddr string, pebble *testenv.Pebble, ask, global, site string) string {
	return fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	storage redis {
		address %s
		password {env.FLEET_REDIS_PASSWORD}
		key_prefix fleet-test:
	}
	on_demand_tls {
		ask %s
	}
%s
}

# Names only the ask endpoint allows, obtained on demand at the first handshake, as behind a load balancer.
https:// {
	tls {
		on_demand
		issuer acme {
			dir %s
			trusted_roots %s
		}
	}
	respond "on demand"
}

https://fleet.localhost {
	tls {
		issuer acme {
			dir %s
			trusted_roots %s
		}
	}
	sandbox_ticket /sandboxes/* {
		secret {env.FLEET_TICKET_SECRET}
		session off
		replay_redis {
			address %s
			password {env.FLEET_REDIS_PASSWORD}
			key_prefix fleet-test:
		}
	}
%s
	respond "admitted {http.vars.sandbox_id}"
}
`, httpPort, httpsPort, redisAddr, ask, global, pebble.DirURL, pebble.RootPath, pebble.DirURL, pebble.RootPath, redisAddr, site)
}

// get fetches path from a gateway's HTTPS site as fleet.localhost.
func (f *fleetGateway) get(t *testing.T, ctx context.Context, path string) (int, string, http.Header) {
	t.Helper()
	return f.do(t, ctx, http.MethodGet, path, "", "")
}

// do sends a request to a gateway's HTTPS site as fleet.localhost, with an API key when key is set, trusting the
// certificate it presents (pebble's roots are random per run; the test compares certificates itself).
func (f *fleetGateway) do(t *testing.T, ctx context.Context, method, path, key, body string) (int, string, http.Header) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", f.httpsPort)
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "fleet.localhost", InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, "https://fleet.localhost"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s on :%d: %v", path, f.httpsPort, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// waitCert waits until the gateway completes a handshake for fleet.localhost and returns the certificate's serial.
func (f *fleetGateway) waitCert(t *testing.T, ctx context.Context) string {
	t.Helper()
	return f.waitCertFor(t, ctx, "fleet.localhost")
}

// waitCertFor is waitCert for another name.
func (f *fleetGateway) waitCertFor(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		st, err := testenv.Handshake(ctx, fmt.Sprintf("127.0.0.1:%d", f.httpsPort), name)
		if err == nil {
			leaf := st.PeerCertificates[0]
			if !strings.Contains(leaf.Issuer.CommonName, "Pebble") {
				t.Fatalf("certificate for %s issued by %q, not pebble", name, leaf.Issuer.CommonName)
			}
			return leaf.SerialNumber.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate for %s on :%d: %v", name, f.httpsPort, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const fleetKey = "fleet-test-key-alice-0123456789"

// TestFleetSharesTicketsAndCertificates: two real gateways share one redis-server. Both start at once and serve
// HTTPS for the same name with one certificate that pebble issued once (the other gateway waited on the lock and
// loaded it from Redis). A ticket minted through A's API for a real sandbox is spent through B, then refused through
// A and B; after kill -9 of A, B still refuses it and A comes back with its sandbox and the same certificate, loaded
// from Redis, not ordered again; with Redis down a fresh ticket is refused (503, retryable) by both and, once Redis is back, admitted
// exactly once. (Only A runs sandboxes: the sandbox state a fleet shares is the Kubernetes driver's, not this test's.)
func TestFleetSharesTicketsAndCertificates(t *testing.T) {
	testenv.Integration(t)
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgfleet")
	testenv.RemoveNamespace(t, ns)
	redis := testenv.StartRedis(t)
	pebble := testenv.StartPebble(t)
	env := []string{"FLEET_REDIS_PASSWORD=" + redis.Password, "FLEET_TICKET_SECRET=" + fleetSecret}
	testenv.CaddyBinary(t) // build once, before the two starts race
	const onDemandName = "app.fleet.localhost"
	ask := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("domain") != onDemandName {
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	defer ask.Close()

	gws := make([]*fleetGateway, 2)
	var wg sync.WaitGroup
	for i := range gws {
		httpsPort, httpPort := testenv.FreePort(t), testenv.FreePort(t)
		gws[i] = &fleetGateway{httpsPort: httpsPort}
		global, site := "", ""
		if i == 0 {
			global = fmt.Sprintf("\tsandboxes {\n\t\tnamespace %s\n\t\tprofile py {\n\t\t\timage %s\n\t\t\tmemory 256m\n"+
				"\t\t\tcapabilities shell\n\t\t}\n\t}", ns, image)
			site = fmt.Sprintf("\tsandbox_api {\n\t\tkey %s alice\n\t\tticket_secret {env.FLEET_TICKET_SECRET}\n\t}", fleetKey)
		}
		cf := fleetCaddyfile(httpPort, httpsPort, redis.Addr, pebble, ask.URL+"/ask", global, site)
		gws[i].caddyfile = cf
		wg.Go(func() { gws[i].g = testenv.StartGateway(t, cf, testenv.GatewayOptions{Env: env}) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	a, b := gws[0], gws[1]
	ctx := context.Background()

	serialA, serialB := a.waitCert(t, ctx), b.waitCert(t, ctx)
	if serialA != serialB {
		t.Fatalf("the gateways serve different certificates (%s, %s): each obtained its own", serialA, serialB)
	}
	if n := strings.Count(pebble.Logs.String(), "Added order"); n != 1 {
		t.Fatalf("pebble saw %d orders, want 1 for the whole fleet:\n%s", n, pebble.Logs.String())
	}
	obtained := 0
	for _, g := range gws {
		obtained += strings.Count(g.g.Logs(), "certificate obtained successfully")
	}
	if obtained != 1 {
		t.Fatalf("%d gateways obtained the certificate, want 1", obtained)
	}

	// On-demand TLS as behind a load balancer: the first handshake for a new name reaches A, which obtains the
	// certificate; B, asked next, loads it from Redis instead of ordering again.
	onDemandA := a.waitCertFor(t, ctx, onDemandName)
	if s := b.waitCertFor(t, ctx, onDemandName); s != onDemandA {
		t.Fatalf("B serves another on-demand certificate (%s, A's %s)", s, onDemandA)
	}
	if n := strings.Count(pebble.Logs.String(), "Added order"); n != 2 {
		t.Fatalf("pebble saw %d orders after the on-demand name, want 2 for the fleet", n)
	}

	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(fleetSecret)})
	if err != nil {
		t.Fatal(err)
	}
	mint := func() string {
		tk, err := iss.Issue(tickets.IssueRequest{SandboxID: "sb-fleet", Kind: tickets.KindApp, Subject: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		return "/sandboxes/sb-fleet/app/?ticket=" + tk.Token
	}
	// A ticket minted through A's API, for a sandbox A created, spent through B.
	code, body, _ := a.do(t, ctx, http.MethodPost, "/v1/sandboxes", fleetKey, `{"profile":"py"}`)
	var sb struct {
		ID string `json:"id"`
	}
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sb) != nil || sb.ID == "" {
		t.Fatalf("creating a sandbox through A: %d %s", code, body)
	}
	code, body, _ = a.do(t, ctx, http.MethodPost, "/v1/sandboxes/"+sb.ID+"/tickets", fleetKey, `{"scope":"app"}`)
	var tk struct {
		Ticket string `json:"ticket"`
	}
	if code/100 != 2 || json.Unmarshal([]byte(body), &tk) != nil || tk.Ticket == "" {
		t.Fatalf("minting a ticket through A: %d %s", code, body)
	}
	path := "/sandboxes/" + sb.ID + "/app/?ticket=" + tk.Ticket
	if code, body, _ := b.get(t, ctx, path); code != http.StatusOK || body != "admitted "+sb.ID {
		t.Fatalf("first use through B: %d %q", code, body)
	}
	for name, g := range map[string]*fleetGateway{"A": a, "B": b} {
		if code, body, _ := g.get(t, ctx, path); code != http.StatusUnauthorized {
			t.Fatalf("replay through %s: %d %q", name, code, body)
		}
	}

	// kill -9 of A loses nothing of what the fleet shares: B still refuses the spent ticket and serves the
	// certificate; A comes back with its sandbox, loads the certificate from Redis without a new order, and refuses
	// the ticket too.
	a.g.Kill()
	if code, _, _ := b.get(t, ctx, path); code != http.StatusUnauthorized {
		t.Fatalf("replay through B after A was killed: %d", code)
	}
	if s := b.waitCert(t, ctx); s != serialA {
		t.Fatalf("B serves another certificate after A was killed: %s", s)
	}
	a.g.Restart(a.caddyfile)
	if s := a.waitCert(t, ctx); s != serialA {
		t.Fatalf("A restarted serves another certificate: %s, want %s", s, serialA)
	}
	if s := a.waitCertFor(t, ctx, onDemandName); s != onDemandA {
		t.Fatalf("A restarted serves another on-demand certificate: %s", s)
	}
	if n := strings.Count(pebble.Logs.String(), "Added order"); n != 2 {
		t.Fatalf("pebble saw %d orders after A restarted, want still 2", n)
	}
	if code, _, _ := a.get(t, ctx, path); code != http.StatusUnauthorized {
		t.Fatalf("replay through the restarted A: %d", code)
	}
	if code, body, _ := a.do(t, ctx, http.MethodGet, "/v1/sandboxes/"+sb.ID, fleetKey, ""); code != http.StatusOK {
		t.Fatalf("the sandbox after A's kill -9 and restart: %d %s", code, body)
	}

	// Redis down: fail closed, and say it is worth retrying.
	redis.Stop()
	fresh := mint()
	for name, g := range map[string]*fleetGateway{"A": a, "B": b} {
		code, body, h := g.get(t, ctx, fresh)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "ticket_store_unavailable") {
			t.Fatalf("with redis down through %s: %d %q", name, code, body)
		}
	}
	redis.Start(t)
	if code, body, _ := a.get(t, ctx, fresh); code != http.StatusOK {
		t.Fatalf("the same ticket once redis is back, through A: %d %q", code, body)
	}
	if code, _, _ := b.get(t, ctx, fresh); code != http.StatusUnauthorized {
		t.Fatalf("its replay through B: %d", code)
	}
}
