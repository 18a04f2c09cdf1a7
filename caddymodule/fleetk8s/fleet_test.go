package fleetk8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/sandboxes/kubernetes"
)

const (
	fleetKey    = "kfleet-test-key-alice-0123456789"
	fleetSecret = "kfleet-secret-0123456789abcdef0123456789"
)

// gateway is one gateway process of the fleet and the base URL of its site.
type gateway struct {
	name, caddyfile, base string
	g                     *testenv.Gateway
}

// fleetCaddyfile is one gateway: the kubernetes driver with state kubernetes on the test's namespace (a short
// Lease, so a killed leader's successor is seen within seconds), the Bay API, tickets spent in Redis, the edge.
func fleetCaddyfile(name string, port int, kubeconfig, ns, label, redisAddr string) string {
	return fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	auto_https off
	sandboxes {
		namespace %s
		gc_interval 1s
		driver kubernetes {
			kubeconfig %s
			namespace %s
			image_pull_policy Never
			state kubernetes {
				identity %s
				lease_duration 6s
				renew_deadline 4s
				retry_period 500ms
			}
		}
		profile small {
			image %s
			cpus 0.5
			memory 256m
			disk 64m
			capabilities shell filesystem
		}
	}
}

http://127.0.0.1:%d {
	sandbox_api {
		key %s alice
		ticket_secret {env.FLEET_TICKET_SECRET}
	}
	sandbox_ticket /sandboxes/* {
		secret {env.FLEET_TICKET_SECRET}
		replay_redis {
			address %s
			password {env.FLEET_REDIS_PASSWORD}
			key_prefix kfleet-test:
		}
	}
	sandbox_proxy /sandboxes/*
}
`, label, kubeconfig, ns, name, testenv.KubeImage("base"), port, fleetKey, redisAddr)
}

// api calls a gateway's Bay API as alice and decodes a JSON answer into out (when not nil).
func (g *gateway) api(t *testing.T, ctx context.Context, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fleetKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s through %s: %v", method, path, g.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s through %s answered %s: %v", method, path, g.name, b, err)
		}
	}
	if resp.StatusCode/100 != 2 {
		t.Logf("%s %s through %s: %d %s", method, path, g.name, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// exec runs a shell command through a gateway's API and returns its output.
func (g *gateway) exec(t *testing.T, ctx context.Context, id, command string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": command, "timeout": 60})
	var res struct {
		Output   string `json:"output"`
		ExitCode int    `json:"exit_code"`
	}
	if code := g.api(t, ctx, http.MethodPost, "/v1/sandboxes/"+id+"/shell/exec", string(body), &res); code != http.StatusOK {
		t.Fatalf("exec %q through %s: %d", command, g.name, code)
	}
	return res.Output
}

// lists reports whether a gateway's API lists the sandbox.
func (g *gateway) lists(t *testing.T, ctx context.Context, id string) bool {
	t.Helper()
	var raw json.RawMessage
	if code := g.api(t, ctx, http.MethodGet, "/v1/sandboxes", "", &raw); code != http.StatusOK {
		return false
	}
	return strings.Contains(string(raw), `"`+id+`"`)
}

// TestFleetOnKubernetes: two real gateway processes, both with the kubernetes driver and state kubernetes on one
// namespace of the test cluster, sharing one redis-server for spent tickets. A sandbox created through A is
// executed in, reached by a terminal WebSocket and listed through B; a terminal ticket minted through A is spent
// through B and then refused through A. After kill -9 of A, B still lists it and executes in it and takes the GC
// Lease; A restarted adopts it without restarting it (a mark in its /tmp is still there, and its workspace), and a
// delete through B leaves it listed by neither.
func TestFleetOnKubernetes(t *testing.T) {
	kube := testenv.KubeCluster(t)
	cs, err := kubernetes.NewClientset(kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := kube.Namespace(t, "sgkf")
	label := testenv.Unique("sgkf")
	redis := testenv.StartRedis(t)
	env := []string{"FLEET_REDIS_PASSWORD=" + redis.Password, "FLEET_TICKET_SECRET=" + fleetSecret}
	testenv.CaddyBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	var gws [2]*gateway
	for i, name := range []string{"gw-a", "gw-b"} {
		port := testenv.FreePort(t)
		gw := &gateway{name: name, base: fmt.Sprintf("http://127.0.0.1:%d", port),
			caddyfile: fleetCaddyfile(name, port, kube.Kubeconfig, ns, label, redis.Addr)}
		gw.g = testenv.StartGateway(t, gw.caddyfile, testenv.GatewayOptions{Env: env})
		gws[i] = gw
	}
	a, b := gws[0], gws[1]

	// Create through A; B lists it and executes in it.
	var sb struct {
		ID string `json:"id"`
	}
	if code := a.api(t, ctx, http.MethodPost, "/v1/sandboxes", `{"profile":"small"}`, &sb); code != http.StatusCreated || sb.ID == "" {
		t.Fatalf("create through A: %d %+v", code, sb)
	}
	testenv.WaitUntil(t, "B to list A's sandbox", func() bool { return b.lists(t, ctx, sb.ID) })
	if out := b.exec(t, ctx, sb.ID, "echo kept > /workspace/f; echo mark > /tmp/mark; cat /workspace/f"); out != "kept\n" {
		t.Fatalf("exec through B answered %q", out)
	}

	// A terminal on B, opened with a ticket minted through A; the same ticket through A is refused.
	var pty agentapi.PTYSession
	if code := b.api(t, ctx, http.MethodPost, "/v1/sandboxes/"+sb.ID+"/pty", `{"cols":80,"rows":24}`, &pty); code != http.StatusCreated || pty.ID == "" {
		t.Fatalf("pty through B: %d %+v", code, pty)
	}
	var tk struct {
		Ticket string `json:"ticket"`
	}
	if code := a.api(t, ctx, http.MethodPost, "/v1/sandboxes/"+sb.ID+"/tickets", `{"scope":"terminal","permission":"write"}`, &tk); code != http.StatusCreated || tk.Ticket == "" {
		t.Fatalf("ticket through A: %d", code)
	}
	wsPath := "/sandboxes/" + sb.ID + "/terminal/ws?pty=" + pty.ID + "&ticket=" + tk.Ticket
	c, _, err := websocket.Dial(ctx, strings.Replace(b.base, "http://", "ws://", 1)+wsPath, nil)
	if err != nil {
		t.Fatalf("terminal through B: %v", err)
	}
	if err := ptyRun(ctx, c, "echo fleet-$((6*7))", "fleet-42"); err != nil {
		t.Fatalf("terminal echo through B: %v", err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	if _, resp, err := websocket.Dial(ctx, strings.Replace(a.base, "http://", "ws://", 1)+wsPath, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the spent ticket through A: %v %v", resp, err)
	}

	// kill -9 of A: B keeps serving the sandbox and takes the GC Lease.
	a.g.Kill()
	if !b.lists(t, ctx, sb.ID) {
		t.Fatal("B no longer lists the sandbox after A was killed")
	}
	if out := b.exec(t, ctx, sb.ID, "cat /workspace/f"); out != "kept\n" {
		t.Fatalf("exec through B after A was killed: %q", out)
	}
	testenv.WaitUntil(t, "B to hold the GC Lease", func() bool {
		l, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].Spec.HolderIdentity != nil && *l.Items[0].Spec.HolderIdentity == "gw-b"
	})

	// A restarted adopts it as it is: same container (the /tmp mark), same workspace.
	a.g.Restart(a.caddyfile)
	testenv.WaitUntil(t, "the restarted A to list the sandbox", func() bool { return a.lists(t, ctx, sb.ID) })
	if out := a.exec(t, ctx, sb.ID, "cat /tmp/mark /workspace/f"); out != "mark\nkept\n" {
		t.Fatalf("exec through the restarted A: %q", out)
	}

	// Delete through B: neither lists it, and no Pod or record is left.
	if code := b.api(t, ctx, http.MethodDelete, "/v1/sandboxes/"+sb.ID, "", nil); code/100 != 2 {
		t.Fatalf("delete through B: %d", code)
	}
	testenv.WaitUntil(t, "A to forget the sandbox", func() bool { return !a.lists(t, ctx, sb.ID) })
	if b.lists(t, ctx, sb.ID) {
		t.Fatal("B still lists the deleted sandbox")
	}
	recs, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "sandgate.dev/state=sandbox"})
	if err != nil || len(recs.Items) != 0 {
		t.Fatalf("records left after delete: %d %v", len(recs.Items), err)
	}
}

// ptyRun sends a command on the terminal WebSocket and waits for marker in its output.
func ptyRun(ctx context.Context, c *websocket.Conn, cmd, marker string) error {
	if err := c.Write(ctx, websocket.MessageBinary, append([]byte{agentapi.PTYChannelStdin}, cmd+"\n"...)); err != nil {
		return err
	}
	var out strings.Builder
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !strings.Contains(out.String(), marker) {
		typ, p, err := c.Read(rctx)
		if err != nil {
			return fmt.Errorf("%w (output so far %q)", err, out.String())
		}
		if typ == websocket.MessageBinary && len(p) > 0 && p[0] == agentapi.PTYChannelStdout {
			out.Write(p[1:])
		}
	}
	return nil
}
