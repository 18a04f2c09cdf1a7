package sandgate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestSharedOriginAppIsSandboxedInBrowser: where the operator opts in to serve apps on the console's own site
// (shared_origin), the app's pages carry Content-Security-Policy: sandbox, so in Chromium a page the sandbox serves,
// opened by the logged-in operator, runs in an opaque origin and cannot read or drive the console.
func TestSharedOriginAppIsSandboxedInBrowser(t *testing.T) {
	testenv.Integration(t)
	ns := testenv.Unique("sgshared")
	testenv.RemoveNamespace(t, ns)
	httpsPort := testenv.FreePort(t)
	const key = "sk-bay-shared-origin-test-key"
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	skip_install_trust
	grace_period 2s
	sandboxes {
		namespace %s
		profile py {
			image %s
			memory 512m
			capabilities shell python filesystem
			app_port 9000
		}
	}
}

https://localhost:%d {
	tls internal
	sandbox_api /v1/* {
		api_key %s
		ticket_base_url https://localhost:%d
	}
	sandbox_pages {
		api_keys
	}
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/* {
		shared_origin
	}
}
`, testenv.FreePort(t), httpsPort, ns, testenv.Image(t, "base"), httpsPort, key, httpsPort)
	g := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{Env: []string{
		"SANDGATE_TICKET_SECRET=shared-origin-test-secret-32-bytes-long!"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	https := g.HTTPSClient(t, ctx, 5*time.Second)
	base := fmt.Sprintf("https://localhost:%d", httpsPort)
	testenv.WaitOK(t, ctx, https, base+"/health")
	api := client.New(base, key)
	api.HTTP = https
	sb, err := api.CreateSandbox(ctx, "py", 900)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if res, err := api.Shell(ctx, sb.ID, "mkdir -p /workspace/app", 30); err != nil || res.ExitCode != 0 {
		t.Fatalf("mkdir: %v %+v", err, res)
	}
	if err := api.WriteFile(ctx, sb.ID, "app/data.txt", "from-the-sandbox\n"); err != nil {
		t.Fatal(err)
	}
	if err := api.WriteFile(ctx, sb.ID, "app/attack.html", exampleAttackHTML(base, sb.ID)); err != nil {
		t.Fatal(err)
	}
	testenv.StartWSEcho(t, testenv.ContainerOf(t, ns, sb.ID), "9000", "-root", "/workspace/app")
	ticket := func() string {
		var tk struct {
			URL string `json:"url"`
		}
		if err := api.Do(ctx, http.MethodPost, "/v1/sandboxes/"+sb.ID+"/tickets",
			map[string]any{"scope": "app", "permission": "read", "ttl": 600}, &tk); err != nil || tk.URL == "" {
			t.Fatalf("app ticket: %v %+v", err, tk)
		}
		return tk.URL
	}
	// Wait for the app in path form; its answers carry the sandbox policy.
	var attackURL string
	for {
		u := strings.Replace(ticket(), "/app/?", "/app/attack.html?", 1)
		resp, err := https.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") || strings.Contains(csp, "allow-same-origin") {
					t.Fatalf("path-form app CSP %q", csp)
				}
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the app never answered: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	attackURL = strings.Replace(ticket(), "/app/?", "/app/attack.html?", 1)
	out, err := testenv.RunNode(t, filepath.Join(testenv.RepoRoot(), "testdata", "example_browser.cjs"),
		"ONLY=shared", "BASE="+base, "KEY="+key, "ATTACK_URL="+attackURL,
		"SCREENSHOTS="+filepath.Join(testenv.RepoRoot(), "build", "screenshots"))
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, out)
	}
	_, res, _ := strings.Cut(out, "RESULT ")
	res, _, _ = strings.Cut(res, "\n")
	var r struct {
		Attack map[string]string
		Origin string
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatalf("result %q: %v", res, err)
	}
	t.Logf("attack page in path form: origin %q, %v", r.Origin, r.Attack)
	if r.Origin != "null" {
		t.Errorf("the app page ran in origin %q, not an opaque one", r.Origin)
	}
	for _, k := range []string{"console", "list", "delete", "sameHost", "frame"} {
		if !strings.HasPrefix(r.Attack[k], "blocked") {
			t.Errorf("%s: %q", k, r.Attack[k])
		}
	}
	got, err := api.GetSandbox(ctx, sb.ID)
	if err != nil || got.Status != "ready" {
		t.Errorf("the sandbox after the attack: %v %+v", err, got)
	}
}
