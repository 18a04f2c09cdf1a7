package caddymodule_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// gatewayCaddyfile is a real gateway config: the sandboxes app in its own namespace and a site proxying WebSockets
// to a test echo server, running the image named by SG_IMAGE (testenv.Image). memory and idle differ between the configs a test reloads.
func gatewayCaddyfile(memory, idle string) string {
	return fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace {$SG_NS}
		gc_interval 1h
		profile small {
			image {$SG_IMAGE}
			cpus 0.5
			memory %s
			disk 64m
			pids 128
			idle_timeout %s
		}
	}
}

http://127.0.0.1:{$SG_PORT} {
	reverse_proxy {$SG_ECHO} {
		stream_close_delay 1m
	}
}
`, memory, idle)
}

func echoServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func adminDo(t *testing.T, g *testenv.Gateway, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+g.AdminAddr+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func createSandbox(t *testing.T, g *testenv.Gateway, ttl string) sandboxes.Sandbox {
	t.Helper()
	code, body := adminDo(t, g, http.MethodPost, "/sandboxes", map[string]any{"profile": "small", "owner": "tester", "ttl": ttl})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb sandboxes.Sandbox
	if err := json.Unmarshal(body, &sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

func getSandbox(t *testing.T, g *testenv.Gateway, id string) (sandboxes.Sandbox, int) {
	t.Helper()
	code, body := adminDo(t, g, http.MethodGet, "/sandboxes/"+id, nil)
	var sb sandboxes.Sandbox
	if code == http.StatusOK {
		if err := json.Unmarshal(body, &sb); err != nil {
			t.Fatal(err)
		}
	}
	return sb, code
}

func waitStatus(t *testing.T, g *testenv.Gateway, id string, want sandboxes.Status) sandboxes.Sandbox {
	t.Helper()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		sb, code := getSandbox(t, g, id)
		if code == http.StatusOK && sb.Status == want {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: status %q (http %d), want %s", id, sb.Status, code, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containerOf(t *testing.T, ns, id string) (containerID, startedAt string, memory string) {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.Id}} {{.State.StartedAt}} {{.HostConfig.Memory}}", ns+"-"+id).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect %s: %v %s", id, err, out)
	}
	f := strings.Fields(string(out))
	return f[0], f[1], f[2]
}

func TestGatewayReloadKeepsSandboxesAndWebSockets(t *testing.T) {
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgr")
	testenv.RemoveNamespace(t, ns)
	echo := echoServer(t)
	port := testenv.FreePort(t)
	g := testenv.StartGateway(t, gatewayCaddyfile("256m", "10m"), testenv.GatewayOptions{Env: []string{
		"SG_IMAGE=" + image, "SG_NS=" + ns, fmt.Sprintf("SG_PORT=%d", port), "SG_ECHO=" + strings.TrimPrefix(echo.URL, "http://"),
	}})
	a, b := createSandbox(t, g, "1h"), createSandbox(t, g, "1h")
	waitStatus(t, g, a.ID, sandboxes.StatusReady)
	waitStatus(t, g, b.ID, sandboxes.StatusReady)
	idA, startA, _ := containerOf(t, ns, a.ID)
	idB, startB, _ := containerOf(t, ns, b.ID)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, fmt.Sprintf("ws://127.0.0.1:%d/", port), nil)
	if err != nil {
		t.Fatalf("websocket through the gateway: %v", err)
	}
	defer ws.CloseNow()
	roundTrip := func(msg string) {
		t.Helper()
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("write %q: %v", msg, err)
		}
		_, got, err := ws.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo of %q: %q %v", msg, got, err)
		}
	}
	roundTrip("before reload")

	if err := g.Reload(gatewayCaddyfile("200m", "20m")); err != nil {
		t.Fatal(err)
	}
	roundTrip("after reload")
	for _, c := range []struct{ id, cid, started string }{{a.ID, idA, startA}, {b.ID, idB, startB}} {
		sb := waitStatus(t, g, c.id, sandboxes.StatusReady)
		cid, started, _ := containerOf(t, ns, c.id)
		if cid != c.cid || started != c.started {
			t.Errorf("sandbox %s: container %s started %s, was %s started %s", sb.ID, cid, started, c.cid, c.started)
		}
	}
	// The new setting applies to new sandboxes.
	n := createSandbox(t, g, "1h")
	waitStatus(t, g, n.ID, sandboxes.StatusReady)
	if _, _, mem := containerOf(t, ns, n.ID); mem != fmt.Sprint(200<<20) {
		t.Errorf("sandbox created after reload has memory %s", mem)
	}
	// A config that fails validation changes nothing.
	if err := g.Reload(strings.Replace(gatewayCaddyfile("200m", "20m"), "memory 200m", "memory lots", 1)); err == nil {
		t.Error("a reload with an invalid memory size was accepted")
	}
	waitStatus(t, g, a.ID, sandboxes.StatusReady)
	roundTrip("after a refused reload")
	code, _ := adminDo(t, g, http.MethodDelete, "/sandboxes/"+n.ID, nil)
	if code != http.StatusNoContent {
		t.Errorf("admin delete: %d", code)
	}
	if _, code := getSandbox(t, g, n.ID); code != http.StatusNotFound {
		t.Errorf("get after delete: %d", code)
	}
}

func TestGatewayKillAndRestartAdoptsSandboxes(t *testing.T) {
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgk")
	testenv.RemoveNamespace(t, ns)
	echo := echoServer(t)
	cfg := gatewayCaddyfile("256m", "10m")
	g := testenv.StartGateway(t, cfg, testenv.GatewayOptions{Env: []string{
		"SG_IMAGE=" + image, "SG_NS=" + ns, fmt.Sprintf("SG_PORT=%d", testenv.FreePort(t)), "SG_ECHO=" + strings.TrimPrefix(echo.URL, "http://"),
	}})
	a, b := createSandbox(t, g, "2h"), createSandbox(t, g, "30m")
	readyA := waitStatus(t, g, a.ID, sandboxes.StatusReady)
	readyB := waitStatus(t, g, b.ID, sandboxes.StatusReady)
	cidA, _, _ := containerOf(t, ns, a.ID)
	cidB, _, _ := containerOf(t, ns, b.ID)

	g.Kill()
	g.Restart(cfg)
	for _, c := range []struct {
		before sandboxes.Sandbox
		cid    string
	}{{readyA, cidA}, {readyB, cidB}} {
		after := waitStatus(t, g, c.before.ID, sandboxes.StatusReady)
		if !after.ExpiresAt.Equal(*c.before.ExpiresAt) {
			t.Errorf("%s: expires_at %v after restart, was %v", after.ID, after.ExpiresAt, c.before.ExpiresAt)
		}
		if after.IdleExpiresAt == nil || !after.IdleExpiresAt.Equal(*c.before.IdleExpiresAt) {
			t.Errorf("%s: idle_expires_at %v after restart, was %v", after.ID, after.IdleExpiresAt, c.before.IdleExpiresAt)
		}
		if cid, _, _ := containerOf(t, ns, after.ID); cid != c.cid {
			t.Errorf("%s: container %s after restart, was %s", after.ID, cid, c.cid)
		}
	}
	code, body := adminDo(t, g, http.MethodGet, "/sandboxes", nil)
	if code != http.StatusOK || !strings.Contains(string(body), a.ID) || !strings.Contains(string(body), b.ID) {
		t.Errorf("list after restart: %d %s", code, body)
	}
	code, body = adminDo(t, g, http.MethodGet, "/metrics", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `sandgate_sandboxes_count{status="ready"} 2`) {
		t.Errorf("metrics: %d\n%s", code, grepLines(string(body), "sandgate_"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestGatewayOnExitDestroy(t *testing.T) {
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgx")
	testenv.RemoveNamespace(t, ns)
	echo := echoServer(t)
	cfg := strings.Replace(gatewayCaddyfile("256m", "10m"), "gc_interval 1h", "gc_interval 1h\n\t\ton_exit destroy", 1)
	g := testenv.StartGateway(t, cfg, testenv.GatewayOptions{Env: []string{
		"SG_IMAGE=" + image, "SG_NS=" + ns, fmt.Sprintf("SG_PORT=%d", testenv.FreePort(t)), "SG_ECHO=" + strings.TrimPrefix(echo.URL, "http://"),
	}})
	sb := createSandbox(t, g, "1h")
	waitStatus(t, g, sb.ID, sandboxes.StatusReady)
	// A reload is not an exit: the sandbox stays.
	if err := g.Reload(strings.Replace(cfg, "idle_timeout 10m", "idle_timeout 11m", 1)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, g, sb.ID, sandboxes.StatusReady)
	g.Stop()
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+ns+".managed").Output()
	vols, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label="+ns+".managed").Output()
	if strings.TrimSpace(string(out)) != "" || strings.TrimSpace(string(vols)) != "" {
		t.Errorf("on_exit destroy left containers %q volumes %q", out, vols)
	}
}
