package caddymodule_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/routes/tickets"
)

const fleetSecret = "fleet-secret-0123456789abcdef0123456789"

// fleetGateway is one gateway of a fleet: its process and the port of its HTTPS site.
type fleetGateway struct {
	g         *testenv.Gateway
	httpsPort int
}

// fleetCaddyfile is one gateway of a fleet sharing redis: certificates in `storage redis`, obtained from pebble for
// fleet.localhost, and spent tickets in sandbox_ticket's replay_redis. The site answers with the admitted sandbox.
func fleetCaddyfile(httpPort, httpsPort int, redisAddr string, pebble *testenv.Pebble) string {
	return fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	skip_install_trust
	storage redis {
		address %s
		password {env.FLEET_REDIS_PASSWORD}
		key_prefix fleet-test:
	}
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
	respond "admitted {http.vars.sandbox_id}"
}
`, httpPort, httpsPort, redisAddr, pebble.DirURL, pebble.RootPath, redisAddr)
}

// get fetches path from a gateway's HTTPS site as fleet.localhost, trusting the certificate it presents (pebble's
// roots are random per run; the test compares certificates itself).
func (f *fleetGateway) get(t *testing.T, ctx context.Context, path string) (int, string, http.Header) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", f.httpsPort)
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "fleet.localhost", InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://fleet.localhost"+path, nil)
	if err != nil {
		t.Fatal(err)
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
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		st, err := testenv.Handshake(ctx, fmt.Sprintf("127.0.0.1:%d", f.httpsPort), "fleet.localhost")
		if err == nil {
			leaf := st.PeerCertificates[0]
			if !strings.Contains(leaf.Issuer.CommonName, "Pebble") {
				t.Fatalf("certificate for fleet.localhost issued by %q, not pebble", leaf.Issuer.CommonName)
			}
			return leaf.SerialNumber.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate for fleet.localhost on :%d: %v", f.httpsPort, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFleetSharesTicketsAndCertificates: two real gateways share one redis-server. Both start at once and serve
// HTTPS for the same name with one certificate that pebble issued once (the other gateway waited on the lock and
// loaded it from Redis). A ticket spent through B is refused through A and B; with Redis down a fresh ticket is
// refused (503, retryable) by both and, once Redis is back, admitted exactly once.
func TestFleetSharesTicketsAndCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two gateways, redis-server and pebble: runs without -short")
	}
	redis := testenv.StartRedis(t)
	pebble := testenv.StartPebble(t)
	env := []string{"FLEET_REDIS_PASSWORD=" + redis.Password, "FLEET_TICKET_SECRET=" + fleetSecret}
	testenv.CaddyBinary(t) // build once, before the two starts race

	gws := make([]*fleetGateway, 2)
	var wg sync.WaitGroup
	for i := range gws {
		httpsPort, httpPort := testenv.FreePort(t), testenv.FreePort(t)
		gws[i] = &fleetGateway{httpsPort: httpsPort}
		cf := fleetCaddyfile(httpPort, httpsPort, redis.Addr, pebble)
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
	path := mint()
	if code, body, _ := b.get(t, ctx, path); code != http.StatusOK || body != "admitted sb-fleet" {
		t.Fatalf("first use through B: %d %q", code, body)
	}
	for name, g := range map[string]*fleetGateway{"A": a, "B": b} {
		if code, body, _ := g.get(t, ctx, path); code != http.StatusUnauthorized {
			t.Fatalf("replay through %s: %d %q", name, code, body)
		}
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
