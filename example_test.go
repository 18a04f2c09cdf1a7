package sandgate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestCaddyfileExampleServes runs the real gateway binary on Caddyfile.example, as `make run` does: the HTTPS site
// answers /health trusting only Caddy's internal CA, and AstrBot's path works on Bay's port with the key the
// gateway generated into credentials.json — profiles, create, ready, an exec, delete; the same for python-isolated,
// whose shell reads gVisor's kernel.
func TestCaddyfileExampleServes(t *testing.T) {
	testenv.Integration(t)
	testenv.ShippedImage(t, "base") // the example's python-default keeps a warm member
	testenv.Runsc(t)                // and python-isolated runs under gVisor: the gateway refuses to start without it
	example, err := os.ReadFile("Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique("sgexample")
	testenv.RemoveNamespace(t, ns)
	httpsPort, bayPort, osbPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	g := testenv.StartGateway(t, string(example), testenv.GatewayOptions{Env: []string{
		fmt.Sprintf("SANDGATE_HTTP_PORT=%d", testenv.FreePort(t)),
		fmt.Sprintf("SANDGATE_HTTPS_PORT=%d", httpsPort),
		fmt.Sprintf("SANDGATE_BAY_PORT=%d", bayPort),
		fmt.Sprintf("SANDGATE_OPENSANDBOX_PORT=%d", osbPort),
		"SANDGATE_NAMESPACE=" + ns,
		"SANDGATE_TICKET_SECRET=example-test-secret-that-is-32-bytes-long",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	https := g.HTTPSClient(t, ctx, 5*time.Second)
	var body string
	for {
		resp, err := https.Get(fmt.Sprintf("https://localhost:%d/health", httpsPort))
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

	var creds struct {
		APIKey string `json:"api_key"`
	}
	b, err := os.ReadFile(filepath.Join(g.DataDir, "sandgate", "credentials.json"))
	if err != nil {
		t.Fatalf("credentials.json: %v", err)
	}
	if err := json.Unmarshal(b, &creds); err != nil || !strings.HasPrefix(creds.APIKey, "sk-bay-") {
		t.Fatalf("credentials.json %s: %v", b, err)
	}
	bay := client.New(fmt.Sprintf("http://127.0.0.1:%d", bayPort), creds.APIKey)
	profiles, err := bay.Profiles(ctx)
	if err != nil || len(profiles) != 4 { // python-default, python-isolated, browser-python, desktop
		t.Fatalf("profiles: %v %+v", err, profiles)
	}
	sb, err := bay.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bay.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res, err := bay.Shell(ctx, sb.ID, "echo from-the-example", 30)
	if err != nil || !strings.Contains(res.Output, "from-the-example") {
		t.Fatalf("shell/exec: %v %+v", err, res)
	}
	if err := bay.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// The isolated profile, the same calls: the sandbox answers from gVisor's kernel.
	iso, err := bay.CreateSandbox(ctx, "python-isolated", 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bay.WaitReady(ctx, iso.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if res, err := bay.Shell(ctx, iso.ID, "uname -r", 30); err != nil || !strings.Contains(res.Output, "gvisor") {
		t.Fatalf("uname -r in python-isolated: %v %+v", err, res)
	}
	if err := bay.DeleteSandbox(ctx, iso.ID); err != nil {
		t.Fatal(err)
	}

	// OpenSandbox's lifecycle API on its port, with the same key.
	exampleOpenSandbox(t, ctx, fmt.Sprintf("http://127.0.0.1:%d", osbPort), creds.APIKey, bay)

	// The console takes the same key (sandbox_pages api_keys): a wrong one is refused, the right one logs in.
	login := func(key string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("https://localhost:%d/console/login", httpsPort),
			strings.NewReader(url.Values{"api_key": {key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", fmt.Sprintf("https://localhost:%d", httpsPort))
		noRedirect := *https
		noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := login("sk-bay-wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("console login with a wrong key: %s", resp.Status)
	}
	if resp := login(creds.APIKey); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Errorf("console login with the API key: %s, cookies %v", resp.Status, resp.Cookies())
	}
}

// exampleOpenSandbox drives the example's OpenSandbox site: a wrong key, create from the example's image with
// metadata, list by it, an endpoint through the gateway, delete; then the isolated profile chosen by the
// sandgate.profile extension (the image is python-default's too), whose sandbox runs under gVisor (read through
// Bay's API with the same key: one core, one owner).
func exampleOpenSandbox(t *testing.T, ctx context.Context, base, key string, bay *client.Client) {
	t.Helper()
	call := func(method, path, key, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("OPEN-SANDBOX-API-KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if resp.Header.Get("X-Request-ID") == "" {
			t.Errorf("%s %s: no X-Request-ID", method, path)
		}
		return resp.StatusCode, m
	}
	if code, m := call("GET", "/v1/sandboxes", "sk-bay-wrong", ""); code != http.StatusUnauthorized || m["code"] != "INVALID_API_KEY" {
		t.Errorf("opensandbox wrong key: %d %v", code, m)
	}
	code, m := call("POST", "/v1/sandboxes", key, `{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["tail","-f","/dev/null"],"timeout":600,"resourceLimits":{"cpu":"1","memory":"1Gi"},"metadata":{"sessionId":"example"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("opensandbox create: %d %v", code, m)
	}
	id, _ := m["id"].(string)
	if code, m := call("GET", "/v1/sandboxes?metadata=sessionId%3Dexample", key, ""); code != http.StatusOK || len(m["items"].([]any)) != 1 {
		t.Errorf("opensandbox list by metadata: %d %v", code, m)
	}
	if code, m := call("GET", "/v1/sandboxes/"+id+"/endpoints/8000?use_server_proxy=true", key, ""); code != http.StatusOK ||
		!strings.Contains(fmt.Sprint(m["endpoint"]), "/sandboxes/"+id+".") {
		t.Errorf("opensandbox endpoint: %d %v", code, m)
	}
	if code, m := call("DELETE", "/v1/sandboxes/"+id, key, ""); code != http.StatusNoContent {
		t.Errorf("opensandbox delete: %d %v", code, m)
	}

	code, m = call("POST", "/v1/sandboxes", key, `{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["tail","-f","/dev/null"],"timeout":600,"extensions":{"sandgate.profile":"python-isolated"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("opensandbox create of python-isolated: %d %v", code, m)
	}
	iso, _ := m["id"].(string)
	if sb, err := bay.WaitReady(ctx, iso, 200*time.Millisecond); err != nil || sb.Profile != "python-isolated" {
		t.Fatalf("the OpenSandbox create naming python-isolated: %v %+v", err, sb)
	}
	if res, err := bay.Shell(ctx, iso, "uname -r", 30); err != nil || !strings.Contains(res.Output, "gvisor") {
		t.Fatalf("uname -r in the OpenSandbox python-isolated sandbox: %v %+v", err, res)
	}
	if code, m := call("DELETE", "/v1/sandboxes/"+iso, key, ""); code != http.StatusNoContent {
		t.Errorf("opensandbox delete of python-isolated: %d %v", code, m)
	}
}
