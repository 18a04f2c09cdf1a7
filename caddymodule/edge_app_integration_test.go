package caddymodule_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// requireAgentRoute skips the test when the agent does not serve path yet (it answers its typed "no route" 404).
func requireAgentRoute(t *testing.T, agentURL, token, path, branch string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, agentURL+path, nil)
	req.Header.Set(agentapi.TokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	if resp.StatusCode == http.StatusNotFound && strings.Contains(string(buf[:n]), "no route") {
		t.Skipf("the agent does not serve %s yet (branch %s)", path, branch)
	}
}

// containerOf is the running container of a sandbox.
func (e *edgeGateway) containerOf(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label="+e.ns+".id="+id).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("no running container for %s: %v", id, err)
	}
	return strings.TrimSpace(string(out))
}

// TestEdgeAppReachesServerInSandbox: /sandboxes/{id}/app/{port}/ reaches an HTTP server started inside the sandbox,
// and a WebSocket server too, through wss://. The sandbox must not idle-stop between the test's own docker exec
// steps (building and copying the echo server can take long on a busy machine), so its profile idles after 10m.
func TestEdgeAppReachesServerInSandbox(t *testing.T) {
	e := startEdgeIdle(t, `	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*
}

https://*.sb.localhost:{EDGE_PORT} {
	tls internal
	sandbox_ticket app {
		base_domains sb.localhost
	}
	sandbox_proxy app`, "10m")
	id := e.createSandbox(t)
	e.get(t, e.client, "/sandboxes/"+id+"/app/8000/?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil) // starts it
	agentURL, token := e.agentOf(t, id)
	requireAgentRoute(t, agentURL, token, "/proxy/1/", "agent-extras")
	ctr := e.containerOf(t, id)

	if out, err := exec.Command("docker", "exec", ctr, "sh", "-c", "mkdir -p /tmp/site && echo hello-from-sandbox > /tmp/site/index.html").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("docker", "exec", "-d", ctr, "python3", "-m", "http.server", "8000", "-d", "/tmp/site").CombinedOutput(); err != nil {
		t.Fatalf("starting http.server: %v %s", err, out)
	}
	testenv.StartWSEcho(t, ctr, "9000")

	// The servers answer once they listen: wait for that (the context only guards against a hang).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var status int
	var body string
	for ctx.Err() == nil {
		status, body, _ = e.get(t, e.client, "/sandboxes/"+id+"/app/8000/index.html?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil)
		if status == http.StatusOK {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if status != http.StatusOK || strings.TrimSpace(body) != "hello-from-sandbox" {
		t.Fatalf("app page: %d %q", status, body)
	}

	// Subdomain form: {port}-{id}.sb.localhost serves the same app at /.
	sub := e.subdomainClient()
	host := fmt.Sprintf("https://8000-%s.sb.localhost:%d", id, e.port)
	resp, err := sub.Get(host + "/index.html?ticket=" + e.ticket(t, id, tickets.KindApp, tickets.PermRead))
	if err != nil {
		t.Fatalf("subdomain form: %v", err)
	}
	subBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(subBody)) != "hello-from-sandbox" {
		t.Fatalf("subdomain form: %d %q", resp.StatusCode, subBody)
	}

	wss := strings.Replace(e.base, "https://", "wss://", 1)
	var c *websocket.Conn
	for { // the echo server may still be starting: the agent answers 502 until it listens
		c, _, err = websocket.Dial(ctx, wss+"/sandboxes/"+id+"/app/9000/ws?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead),
			&websocket.DialOptions{HTTPClient: e.client})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("app WebSocket: %v", err)
	}
	defer c.CloseNow()
	echo := func(msg string) {
		t.Helper()
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		c.SetReadLimit(1 << 20)
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
		}
	}
	echo("one")
	echo(strings.Repeat("z", 100000))

	// A reload that changes a setting keeps the open WebSocket (stream_close_delay) and the sandbox.
	if err := e.g.Reload(strings.Replace(e.caddyfile, "grace_period 2s", "grace_period 3s", 1)); err != nil {
		t.Fatal(err)
	}
	echo("after reload")
	time.Sleep(time.Second)
	echo("still after reload")
}

// TestEdgeVNCWebsockifyHandshake: /sandboxes/{id}/vnc/websockify reaches the sandbox's VNC server, which greets
// with the RFB protocol version.
func TestEdgeVNCWebsockifyHandshake(t *testing.T) {
	e := startEdgeBrowser(t)
	id := e.createSandbox(t)
	e.get(t, e.client, "/sandboxes/"+id+"/app/8000/?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil)
	agentURL, token := e.agentOf(t, id)
	requireAgentRoute(t, agentURL, token, "/vnc/websockify", "agent-extras")

	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	wss := strings.Replace(e.base, "https://", "wss://", 1)
	var c *websocket.Conn
	var err error
	for {
		c, _, err = websocket.Dial(ctx, wss+"/sandboxes/"+id+"/vnc/websockify?ticket="+e.ticket(t, id, tickets.KindVNC, tickets.PermWrite),
			&websocket.DialOptions{HTTPClient: e.client, Subprotocols: []string{"binary"}})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second) // the VNC server starts with the desktop
	}
	if err != nil {
		t.Fatalf("websockify: %v", err)
	}
	defer c.CloseNow()
	_, greeting, err := c.Read(ctx)
	if err != nil || !strings.HasPrefix(string(greeting), "RFB 003.") {
		t.Fatalf("RFB greeting: %q %v", greeting, err)
	}
}

// startEdgeBrowser is startEdge with a browser profile (Chromium, Xvfb, VNC).
func startEdgeBrowser(t *testing.T) *edgeGateway {
	t.Helper()
	return startEdgeWith(t, `	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/* {
		max_message 1MiB
	}`, `
		profile py {
			image `+testenv.Image(t, "browser")+`
			cpus 1
			memory 1g
			pids 512
			disk 256m
			capabilities shell python filesystem browser vnc
			app_port 3000
			idle_timeout 10m
		}`)
}

// subdomainClient resolves every name to the gateway on 127.0.0.1 (no DNS for *.sb.localhost in tests).
func (e *edgeGateway) subdomainClient() *http.Client {
	tr := e.client.Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", e.port))
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
