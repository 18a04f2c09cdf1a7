package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"
)

// RootCAs waits for the gateway's internal CA (the one `tls internal` sites use) and returns a pool trusting only
// its root, so a test's client proves the gateway served the certificate and nothing else could.
func (g *Gateway) RootCAs(t testing.TB, ctx context.Context) *x509.CertPool {
	t.Helper()
	path, err := g.WaitRootCA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the internal CA root: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("the internal CA root %s is not PEM", path)
	}
	return pool
}

// HTTPSClient is a client of the gateway's `tls internal` sites that trusts only the internal CA's root (waited
// for under ctx); timeout bounds each request, 0 leaves them unbounded.
func (g *Gateway) HTTPSClient(t testing.TB, ctx context.Context, timeout time.Duration) *http.Client {
	t.Helper()
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: g.RootCAs(t, ctx)}}}
}

// WaitHandshake polls url with c until a request completes, whatever its status: the internal CA's root exists
// before a site's certificate does, so a first request may fail its handshake. It fails t once ctx ends.
func WaitHandshake(t testing.TB, ctx context.Context, c *http.Client, url string) {
	t.Helper()
	if err := poll(ctx, c, url, func(*http.Response) bool { return true }); err != nil {
		t.Fatalf("no TLS handshake with %s: %v", url, err)
	}
}

// WaitOK polls url with c until it answers 200. It fails t once ctx ends.
func WaitOK(t testing.TB, ctx context.Context, c *http.Client, url string) {
	t.Helper()
	if err := poll(ctx, c, url, func(r *http.Response) bool { return r.StatusCode == http.StatusOK }); err != nil {
		t.Fatalf("%s never answered 200: %v", url, err)
	}
}

// poll GETs url every 100 ms until done accepts an answer; once ctx ends it reports the last failure (the
// request's error, or the status done refused).
func poll(ctx context.Context, c *http.Client, url string, done func(*http.Response) bool) error {
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if done(resp) {
				return nil
			}
			err = fmt.Errorf("answered %s", resp.Status)
		}
		if ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
