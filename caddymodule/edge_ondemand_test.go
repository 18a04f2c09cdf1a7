package caddymodule_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testenv"
)

// startPebble runs Debian's pebble ACME server on free loopback ports, validating nothing
// (PEBBLE_VA_ALWAYS_VALID), and returns its directory URL and the certificate of its listener.
func startPebble(t *testing.T) (dirURL, rootPath string) {
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
	logs := &strings.Builder{}
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
	return "https://" + listen + "/dir", cert
}

// TestEdgeOnDemandTLSOnlyForLiveSandboxes: with tls.permission.sandbox, Caddy obtains a certificate from an ACME CA
// for a live sandbox's name (both subdomain forms) and refuses the handshake for any other name without asking
// the CA.
func TestEdgeOnDemandTLSOnlyForLiveSandboxes(t *testing.T) {
	testenv.Integration(t)
	dirURL, pebbleRoot := startPebble(t)
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
