package fleet_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/redisstore"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/kubernetes/driver"
)

// fleetAPIKey and fleetSecret stand for the Secret `sandgate` of deploy/kubernetes (api-key, ticket-secret).
const (
	fleetAPIKey = "kfleet-test-key-0123456789abcdef"
	fleetSecret = "kfleet-secret-0123456789abcdef0123456789"
	// fleetDomain and fleetContentDomain stand for the settings SANDGATE_DOMAIN and SANDGATE_CONTENT_DOMAIN: names
	// under .localhost, which Caddy certifies with its local CA (kept in Redis like any certificate).
	fleetDomain        = "sandgate.localhost"
	fleetContentDomain = "sandbox.sandgate.localhost"
)

// gateway is one gateway process of the fleet, running deploy/kubernetes/Caddyfile as it ships: base is its Bay
// port (the Service sandgate-api), httpsPort its HTTPS port (the LoadBalancer's 443).
type gateway struct {
	name, caddyfile, base string
	httpsPort             int
	g                     *testenv.Gateway
}

// shippedGatewayEnv is the environment the Deployment of deploy/kubernetes gives each replica (its settings, its
// Secret, POD_NAME), with this test's values, plus what a Pod does not need: the ServiceAccount's kubeconfig (a
// Pod has its token mounted) and ports of the test's own (a Pod owns 80, 443 and 8114).
func shippedGatewayEnv(name, kubeconfig, sandboxNS, mode string, redis *testenv.Redis, httpPort, httpsPort, bayPort int) []string {
	return []string{
		"SANDGATE_KUBERNETES_MODE=" + mode,
		"SANDGATE_DOMAIN=" + fleetDomain,
		"SANDGATE_CONTENT_DOMAIN=" + fleetContentDomain,
		"SANDGATE_SANDBOX_NAMESPACE=" + sandboxNS,
		"SANDGATE_SANDBOX_IMAGE=" + testenv.KubeImage("base"),
		"SANDGATE_BROWSER_IMAGE=" + testenv.KubeImage("browser"),
		"SANDGATE_REDIS_ADDRESS=" + redis.Addr,
		"POD_NAME=" + name,
		"SANDGATE_TICKET_SECRET=" + fleetSecret,
		"BAY_API_KEY=" + fleetAPIKey,
		"REDIS_PASSWORD=" + redis.Password,
		"SANDGATE_KUBECONFIG=" + kubeconfig,
		fmt.Sprintf("SANDGATE_HTTP_PORT=%d", httpPort),
		fmt.Sprintf("SANDGATE_HTTPS_PORT=%d", httpsPort),
		fmt.Sprintf("SANDGATE_BAY_PORT=%d", bayPort),
	}
}

// httpsClient reaches a gateway's HTTPS port as a browser reaches the LoadBalancer: SNI and Host are fleetDomain,
// the connection goes to 127.0.0.1, and the certificate must chain to roots.
func (g *gateway) httpsClient(roots *x509.CertPool) *http.Client {
	addr := fmt.Sprintf("127.0.0.1:%d", g.httpsPort)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{ServerName: fleetDomain, RootCAs: roots},
	}}
}

// httpsURL is path on the gateway's origin as the browser names it.
func (g *gateway) httpsURL(scheme, path string) string {
	return fmt.Sprintf("%s://%s:%d%s", scheme, fleetDomain, g.httpsPort, path)
}

// servesOrigin reports whether the gateway's HTTPS origin answers as deploy/kubernetes/Caddyfile's does. With roots
// nil any certificate is taken (the CA is not known yet); seen, when not nil, gets the certificate served.
func (g *gateway) servesOrigin(ctx context.Context, roots *x509.CertPool, seen func(*x509.Certificate)) bool {
	client := g.httpsClient(roots)
	if roots == nil {
		client.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.httpsURL("https", "/"), nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if seen != nil && resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		seen(resp.TLS.PeerCertificates[0])
	}
	return resp.StatusCode == http.StatusOK && string(body) == "sandgate gateway"
}

// sharedFile reads a file of the fleet's certificate storage (`storage redis` with the default prefix) through the
// storage's own code.
func sharedFile(ctx context.Context, r *testenv.Redis, key string) ([]byte, error) {
	client, err := redisstore.NewClient(redisstore.Options{Addr: r.Addr, Password: r.Password})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	return redisstore.NewStorage(client, "sandgate:certmagic:", 0).Load(ctx, key)
}

// api calls a gateway's Bay API as alice and decodes a JSON answer into out (when not nil).
func (g *gateway) api(t *testing.T, ctx context.Context, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fleetAPIKey)
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

// TestFleetOnKubernetes runs deploy/kubernetes as it ships, on the test cluster. Every object it renders to
// (`kubectl kustomize`) passes the API server's strict validation (a server-side dry run); its Namespaces and RBAC
// are applied for real, and two gateway processes run its Caddyfile as the ServiceAccount it binds, with the
// environment its Deployment gives a replica, sharing one redis-server as their Redis. So the Role is enough for
// everything a fleet does, the namespace's Pod Security level admits the sandboxes, and the Caddyfile works as a
// fleet:
//   - a sandbox created through A is executed in and listed through B;
//   - a terminal ticket minted through A opens a WebSocket through B's HTTPS origin and is then refused through A;
//   - both serve the same certificate, obtained once and kept in Redis;
//   - after kill -9 of A, B still lists it and executes in it and takes the GC Lease; A restarted adopts it
//     without restarting it (a mark in its /tmp is still there, and its workspace);
//   - a delete through B leaves it listed by neither.
func TestFleetOnKubernetes(t *testing.T) { fleetOnKubernetes(t, deployDir()) }

// TestFleetOnKubernetesAgentSandbox runs the same fleet with the component agent-sandbox enabled as the README
// says: the gateways in mode agent_sandbox under the Role the component extends, each sandbox a Sandbox run by the
// test cluster's agent-sandbox controller.
func TestFleetOnKubernetesAgentSandbox(t *testing.T) {
	fleetOnKubernetes(t, withComponent(t, "agent-sandbox"))
}

func fleetOnKubernetes(t *testing.T, dir string) {
	kube := testenv.KubeCluster(t)
	cs, err := driver.NewClientset(kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns, gatewayNS := kube.Namespace(t, "sgkf"), kube.Namespace(t, "sgkg")

	objs := shippedManifests(ctx, t, kube, dir, gatewayNS, ns)
	mode := setting(t, objs, "SANDGATE_KUBERNETES_MODE")
	if out, err := applyObjects(ctx, kube, objs, "--dry-run=server", "--validate=strict"); err != nil {
		t.Fatalf("deploy/kubernetes, server-side dry run: %v\n%s", err, out)
	}
	if out, err := applyObjects(ctx, kube, ofKind(objs, "Namespace", "ServiceAccount", "Role", "RoleBinding")); err != nil {
		t.Fatalf("applying deploy/kubernetes' namespaces and RBAC: %v\n%s", err, out)
	}
	// The API server's authorizer follows RBAC objects through a watch: wait until it grants what was applied, so the
	// gateways' start-up check does not race it.
	sa := "system:serviceaccount:" + gatewayNS + ":sandgate-gateway"
	if err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := kube.Run(ctx, "auth", "can-i", "update", "leases.coordination.k8s.io", "-n", ns, "--as", sa)
		return err == nil, err
	}); err != nil {
		t.Fatalf("the shipped Role never reached %s: %v", sa, err)
	}
	kubeconfig := serviceAccountKubeconfig(ctx, t, kube, gatewayNS, "sandgate-gateway")
	caddyfile, err := os.ReadFile(filepath.Join(dir, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	redis := testenv.StartRedis(t)
	bin := testenv.KubeCaddyBinary(t)

	// A first, then B: Caddy makes its local CA without a lock, so gateways sharing an empty storage start one at a
	// time (docs/kubernetes.md); B then loads A's CA and certificate from Redis.
	var gws [2]*gateway
	for i, name := range []string{"gw-a", "gw-b"} {
		bay, httpsPort := testenv.FreePort(t), testenv.FreePort(t)
		gw := &gateway{name: name, base: fmt.Sprintf("http://127.0.0.1:%d", bay), httpsPort: httpsPort, caddyfile: string(caddyfile)}
		gw.g = testenv.StartGateway(t, gw.caddyfile, testenv.GatewayOptions{Binary: bin,
			Env: shippedGatewayEnv(name, kubeconfig, ns, mode, redis, testenv.FreePort(t), httpsPort, bay)})
		testenv.WaitUntil(t, name+" to answer on its origin", func() bool { return gw.servesOrigin(ctx, nil, nil) })
		gws[i] = gw
	}
	a, b := gws[0], gws[1]
	roots := x509.NewCertPool()
	root, err := sharedFile(ctx, redis, "pki/authorities/local/root.crt")
	if err != nil || !roots.AppendCertsFromPEM(root) {
		t.Fatalf("the local CA's root in Redis: %v %q", err, root)
	}
	serials := map[string]bool{}
	for _, gw := range gws {
		var leaf *x509.Certificate
		if !gw.servesOrigin(ctx, roots, func(c *x509.Certificate) { leaf = c }) {
			t.Fatalf("%s's origin with the CA kept in Redis: not served\n%s", gw.name, gw.g.Logs())
		}
		serials[leaf.SerialNumber.String()] = true
	}
	if len(serials) != 1 {
		t.Fatalf("the two gateways serve different certificates for %s: serials %v", fleetDomain, serials)
	}

	// Create through A; B lists it and executes in it.
	var sb struct {
		ID string `json:"id"`
	}
	if code := a.api(t, ctx, http.MethodPost, "/v1/sandboxes", `{"profile":"python-default"}`, &sb); code != http.StatusCreated || sb.ID == "" {
		t.Fatalf("create through A: %d %+v", code, sb)
	}
	testenv.WaitUntil(t, "B to list A's sandbox", func() bool { return b.lists(t, ctx, sb.ID) })
	// What holds it in the cluster: one Sandbox in mode agent_sandbox, none in mode pods.
	agentSandboxes := func() int {
		t.Helper()
		out, err := kube.Run(ctx, "get", "sandboxes.agents.x-k8s.io", "-n", ns, "-o", "name")
		if err != nil {
			t.Fatalf("kubectl get sandboxes: %v: %s", err, out)
		}
		return len(strings.Fields(string(out)))
	}
	if want := map[string]int{driver.ModePods: 0, driver.ModeAgentSandbox: 1}[mode]; agentSandboxes() != want {
		t.Fatalf("mode %s: %d agent-sandbox Sandboxes, want %d", mode, agentSandboxes(), want)
	}
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
	c, _, err := websocket.Dial(ctx, b.httpsURL("wss", wsPath), &websocket.DialOptions{HTTPClient: b.httpsClient(roots)})
	if err != nil {
		t.Fatalf("terminal through B: %v", err)
	}
	if err := testenv.PTYRun(ctx, c, "echo fleet-$((6*7))", "fleet-42"); err != nil {
		t.Fatalf("terminal echo through B: %v", err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	if _, resp, err := websocket.Dial(ctx, a.httpsURL("wss", wsPath), &websocket.DialOptions{HTTPClient: a.httpsClient(roots)}); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
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
	recs, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "sandgate.dev/state=sandbox"})
	if err != nil || len(recs.Items) != 0 {
		t.Fatalf("records left after delete: %d %v", len(recs.Items), err)
	}
	testenv.WaitUntil(t, "no Sandbox to be left", func() bool { return agentSandboxes() == 0 })
}
