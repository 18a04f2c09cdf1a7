package testenv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Pebble is Debian's pebble ACME server run by a test, for the gateway's on-demand TLS.
type Pebble struct {
	// DirURL is its ACME directory (acme_ca), RootPath the certificate of its own listener (acme_ca_root).
	DirURL, RootPath string
	// Logs is what it printed: one "Added order" line per ACME order it was sent.
	Logs *SyncBuffer
}

// StartPebble runs pebble on free loopback ports, validating nothing (PEBBLE_VA_ALWAYS_VALID, so test names need
// no DNS), and waits until it listens; it stops when the test ends. Without pebble installed the test skips
// (scripts/prereqs.sh pebble installs it).
func StartPebble(t testing.TB) *Pebble {
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
	listen := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":           listen,
		"managementListenAddress": fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		"certificate":             cert, "privateKey": key,
		"httpPort": FreePort(t), "tlsPort": FreePort(t),
	}}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("pebble", "-config", cfgPath)
	cmd.Env = append(os.Environ(), "PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_WFE_NONCEREJECT=0")
	p := &Pebble{DirURL: "https://" + listen + "/dir", RootPath: cert, Logs: &SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pebble log:\n%s", p.Logs.String())
		}
	})
	deadline := time.Now().Add(WaitLimit)
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
	return p
}

// Handshake completes a TLS handshake with addr for the server name, under ctx and 60 s at most, and returns what
// the server presented. It trusts any certificate (pebble's roots are random per run): callers check the issuer
// and names themselves; what a test learns from it is whether the gateway served a certificate at all.
func Handshake(ctx context.Context, addr, name string) (*tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{ServerName: name, InsecureSkipVerify: true}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st := c.(*tls.Conn).ConnectionState()
	return &st, nil
}
