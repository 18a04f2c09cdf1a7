package sandgate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testenv"
)

// TestCaddyfileExampleServes runs the real gateway binary on Caddyfile.example, as `make run` does, and fetches
// https://localhost:<port>/health trusting only Caddy's internal CA.
func TestCaddyfileExampleServes(t *testing.T) {
	testenv.Integration(t)
	example, err := os.ReadFile("Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	httpsPort := testenv.FreePort(t)
	g := testenv.StartGateway(t, string(example), testenv.GatewayOptions{Env: []string{
		fmt.Sprintf("SANDGATE_HTTP_PORT=%d", testenv.FreePort(t)),
		fmt.Sprintf("SANDGATE_HTTPS_PORT=%d", httpsPort),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := httpsClient(t, ctx, g)
	var body string
	for {
		resp, err := client.Get(fmt.Sprintf("https://localhost:%d/health", httpsPort))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				body = string(b)
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("https://localhost:%d/health never answered 200: %v", httpsPort, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("health body %q", body)
	}
}

// httpsClient trusts only the gateway's internal CA root.
func httpsClient(t *testing.T, ctx context.Context, g *testenv.Gateway) *http.Client {
	t.Helper()
	rootPath, err := g.WaitRootCA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("internal CA root is not PEM")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}
