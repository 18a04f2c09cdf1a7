package caddymodule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// connectScript tries a TCP connect to each host:port argument and prints "addr errno" (0 when it connected).
const connectScript = `import socket,sys
for a in sys.argv[1:]:
    h,p=a.rsplit(":",1)
    s=socket.socket(); s.settimeout(3)
    try:
        s.connect((h,int(p))); print(a,0)
    except OSError as e:
        print(a,e.errno)`

// TestNetworkNoneSandbox: a profile with network none starts a sandbox the gateway reaches only over the agent's
// UNIX socket: it becomes ready, runs a command through the REST API and a terminal WebSocket through the edge
// proxy, has no interface but loopback (every connect fails at once with ENETUNREACH: nothing is sent), and its
// socket directory goes with it on delete.
func TestNetworkNoneSandbox(t *testing.T) {
	e := startEdgeWith(t, `	sandbox_api {
		key sk-none tester
	}
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*`, fmt.Sprintf(`
		profile sealed {
			image %s
			memory 256m
			network none
			capabilities shell filesystem
		}`, testenv.Image(t, "base")))
	socketRoot := filepath.Join("/run/sandgate", e.ns)
	t.Cleanup(func() { _ = os.RemoveAll(socketRoot) })

	api := func(method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, _ := http.NewRequest(method, e.base+path, rd)
		req.Header.Set("Authorization", "Bearer sk-none")
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	code, body := api(http.MethodPost, "/v1/sandboxes", map[string]any{"profile": "sealed"})
	if code/100 != 2 {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ ID string }
	_ = json.Unmarshal(body, &sb)
	id := sb.ID

	// The command starts the sandbox: readiness is probed over the socket.
	code, body = api(http.MethodPost, "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": "echo sealed-$((6*7))", "timeout": 60})
	if code != http.StatusOK || !strings.Contains(string(body), "sealed-42") {
		t.Fatalf("shell/exec: %d %s", code, body)
	}
	if s := e.sandboxStatus(t, id); s != "ready" {
		t.Fatalf("status %s", s)
	}
	sockDir := filepath.Join(socketRoot, id)
	if fi, err := os.Lstat(filepath.Join(sockDir, "agent.sock")); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("agent socket: %v %v", fi, err)
	}

	// A terminal WebSocket through the edge proxy, dialled over the socket.
	code, body = api(http.MethodPost, "/v1/sandboxes/"+id+"/pty", map[string]any{"cols": 80, "rows": 24})
	var pty struct{ ID string }
	if code/100 != 2 || json.Unmarshal(body, &pty) != nil || pty.ID == "" {
		t.Fatalf("pty: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wss := strings.Replace(e.base, "https://", "wss://", 1)
	c, _, err := websocket.Dial(ctx, wss+"/sandboxes/"+id+"/terminal/ws?pty="+pty.ID+"&ticket="+e.ticket(t, id, tickets.KindTerminal, tickets.PermWrite),
		&websocket.DialOptions{HTTPClient: e.client})
	if err != nil {
		t.Fatalf("dialing the terminal: %v", err)
	}
	defer c.CloseNow()
	if err := testenv.PTYRun(ctx, c, "echo term-$((40+2))", "term-42"); err != nil {
		t.Fatalf("terminal echo: %v", err)
	}

	// Nothing but loopback: the host's bridge address (where the gateway listens), another container, a public
	// address. With no route, connect() fails at once with ENETUNREACH (101) and sends nothing.
	ctr := e.containerOf(t, id)
	peer := testenv.RunSandbox(t, testenv.SandboxOptions{}) // a container of the test's own, on the default bridge
	bridgeGW, err := exec.Command("docker", "inspect", "-f", "{{.NetworkSettings.Gateway}}", peer.Name).Output()
	if err != nil || strings.TrimSpace(string(bridgeGW)) == "" {
		t.Fatalf("the default bridge's host address: %v %q", err, bridgeGW)
	}
	targets := []string{
		fmt.Sprintf("%s:%d", strings.TrimSpace(string(bridgeGW)), e.port),
		peer.IP + ":7777",
		"1.1.1.1:443",
	}
	out, err := exec.Command("docker", append([]string{"exec", ctr, "python3", "-c", connectScript}, targets...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("connect probe: %v %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(targets) {
		t.Fatalf("connect probe: %q", out)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " 101") {
			t.Errorf("connect from a network none sandbox: %q, want errno 101 (ENETUNREACH)", l)
		}
	}
	dev, err := exec.Command("docker", "exec", ctr, "cat", "/proc/net/dev").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(dev), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && name != "lo" {
			t.Errorf("interface %s in a network none sandbox:\n%s", name, dev)
		}
	}

	// Delete removes the socket directory.
	c.CloseNow()
	if code, body := api(http.MethodDelete, "/v1/sandboxes/"+id, nil); code/100 != 2 {
		t.Fatalf("delete: %d %s", code, body)
	}
	if _, err := os.Stat(sockDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket directory after delete: %v", err)
	}
}
