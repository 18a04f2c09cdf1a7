package caddymodule_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

const edgeSecret = "edge-integration-secret-0123456789abcdef"

// edgeGateway is a real gateway over HTTPS (tls internal) and a client that trusts its CA.
type edgeGateway struct {
	g         *testenv.Gateway
	base      string // https://localhost:port
	client    *http.Client
	issuer    *tickets.Issuer
	accessLog string
	ns        string
	caddyfile string
	port      int
}

// startEdge runs the gateway with site as the body of the https://localhost site and, when withSandboxes is set, a
// sandboxes app in a namespace of its own whose containers are removed at the end. Its profile py idles after 4s:
// for tests of idle stops and leases.
func startEdge(t *testing.T, site string, withSandboxes bool) *edgeGateway {
	t.Helper()
	if !withSandboxes {
		return startEdgeWith(t, site, "")
	}
	return startEdgeIdle(t, site, "4s")
}

// startEdgeIdle is startEdge with profile py's idle timeout set to idle. Tests that are not about idling use a long
// one: on a busy machine the steps between two gateway requests (docker exec, a go build) can outlast a short one.
func startEdgeIdle(t *testing.T, site, idle string) *edgeGateway {
	t.Helper()
	return startEdgeWith(t, site, fmt.Sprintf(`
		profile py {
			image %s
			cpus 0.5
			memory 256m
			pids 128
			disk 64m
			capabilities shell python filesystem
			app_port 3000
			idle_timeout %s
		}`, testenv.Image(t, "base"), idle))
}

// startEdgeWith runs the gateway with a sandboxes app holding profile (none when empty).
func startEdgeWith(t *testing.T, site, profile string) *edgeGateway {
	t.Helper()
	testenv.Integration(t)
	e := &edgeGateway{ns: testenv.Unique("sgedge")}
	httpsPort, httpPort := testenv.FreePort(t), testenv.FreePort(t)
	e.accessLog = filepath.Join(t.TempDir(), "access.log")
	var sb string
	if profile != "" {
		sb = fmt.Sprintf(`
	sandboxes {
		namespace %s
		gc_interval 1s%s
	}`, e.ns, profile)
		testenv.RemoveNamespace(t, e.ns)
	}
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	skip_install_trust
	grace_period 2s%s
}

https://localhost:%d {
	tls internal
	log {
		output file %s
		format filter {
			request>uri query {
				delete ticket
			}
		}
	}
%s
}
`, httpPort, httpsPort, sb, httpsPort, e.accessLog, site)
	if strings.Contains(site, "\n}\n") { // extra site blocks after the first: their port placeholder
		caddyfile = strings.ReplaceAll(caddyfile, "{EDGE_PORT}", strconv.Itoa(httpsPort))
	}
	e.port = httpsPort
	e.serve(t, caddyfile, httpsPort, "/")
	return e
}

// serve starts the gateway with caddyfile, its https://localhost site on httpsPort, and waits until a request to
// probe completes a TLS handshake with a client that trusts the gateway's internal CA only.
func (e *edgeGateway) serve(t *testing.T, caddyfile string, httpsPort int, probe string) {
	t.Helper()
	e.caddyfile = caddyfile
	e.g = testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{Env: []string{tickets.EnvSecret + "=" + edgeSecret}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.client = e.g.HTTPSClient(t, ctx, 90*time.Second)
	e.base = fmt.Sprintf("https://localhost:%d", httpsPort)
	testenv.WaitHandshake(t, ctx, e.client, e.base+probe)
	var err error
	e.issuer, err = tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(edgeSecret)})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *edgeGateway) ticket(t *testing.T, id string, kind tickets.Kind, perm tickets.Permission) string {
	t.Helper()
	tk, err := e.issuer.Issue(tickets.IssueRequest{SandboxID: id, Kind: kind, Permission: perm, Subject: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return tk.Token
}

func (e *edgeGateway) get(t *testing.T, c *http.Client, path string, hdr http.Header) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp
}

// TestEdgeTicketOnceOverHTTPS: through the real binary over HTTPS, a ticket opens its route once, a replay gets the
// generic 401, the session cookie carries the page's next requests, and the access log never holds the ticket.
func TestEdgeTicketOnceOverHTTPS(t *testing.T) {
	e := startEdge(t, `	sandbox_ticket /sandboxes/*
	respond /sandboxes/* "{http.vars.sandbox_id} {http.vars.sandbox_kind} {http.vars.sandbox_permission} {http.request.uri}"`, false)

	tok := e.ticket(t, "sandbox-a1", tickets.KindApp, tickets.PermRead)
	path := "/sandboxes/sandbox-a1/app/3000/index.html?x=1&ticket=" + url.QueryEscape(tok)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: e.client.Transport, Jar: jar, Timeout: 30 * time.Second}

	status, body, resp := e.get(t, browser, path, nil)
	if status != http.StatusOK || body != "sandbox-a1 app read /sandboxes/sandbox-a1/app/3000/index.html?x=1" {
		t.Fatalf("first use: %d %q", status, body)
	}
	ck := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{"sandgate_session=", "Path=/sandboxes/sandbox-a1/app", "HttpOnly", "Secure", "SameSite=Strict"} {
		if !strings.Contains(ck, attr) {
			t.Errorf("Set-Cookie %q lacks %s", ck, attr)
		}
	}

	status, body, _ = e.get(t, e.client, path, nil) // no cookie jar: the ticket alone
	if status != http.StatusUnauthorized || strings.Contains(body, "replayed") || !strings.Contains(body, `"code":"unauthorized"`) {
		t.Fatalf("second use: %d %q", status, body)
	}

	// The page's asset request rides on the cookie.
	status, body, _ = e.get(t, browser, "/sandboxes/sandbox-a1/app/3000/app.js", nil)
	if status != http.StatusOK || !strings.HasPrefix(body, "sandbox-a1 app read") {
		t.Fatalf("asset with session: %d %q", status, body)
	}
	// The cookie is not sent to another sandbox, and a ticket for another sandbox or kind is refused.
	if status, _, _ = e.get(t, browser, "/sandboxes/sandbox-b2/app/", nil); status != http.StatusUnauthorized {
		t.Fatalf("other sandbox with the cookie jar: %d", status)
	}
	other := e.ticket(t, "sandbox-b2", tickets.KindApp, tickets.PermRead)
	if status, _, _ = e.get(t, e.client, "/sandboxes/sandbox-a1/app/?ticket="+other, nil); status != http.StatusUnauthorized {
		t.Fatalf("wrong sandbox: %d", status)
	}
	cdp := e.ticket(t, "sandbox-a1", tickets.KindCDP, tickets.PermWrite)
	if status, _, _ = e.get(t, e.client, "/sandboxes/sandbox-a1/app/?ticket="+cdp, nil); status != http.StatusUnauthorized {
		t.Fatalf("wrong kind: %d", status)
	}
	// Bearer form, write permission.
	w := e.ticket(t, "sandbox-a1", tickets.KindTerminal, tickets.PermWrite)
	status, body, _ = e.get(t, e.client, "/sandboxes/sandbox-a1/terminal/ws?pty=p1", http.Header{"Authorization": {"Bearer " + w}})
	if status != http.StatusOK || body != "sandbox-a1 terminal write /sandboxes/sandbox-a1/terminal/ws?pty=p1" {
		t.Fatalf("bearer: %d %q", status, body)
	}

	// A reload that changes the ticket settings keeps the spent nonces: the first ticket stays spent.
	if err := e.g.Reload(strings.Replace(e.caddyfile, "sandbox_ticket /sandboxes/*", "sandbox_ticket /sandboxes/* {\n\t\tleeway 2s\n\t\treplay_cache 5000\n\t}", 1)); err != nil {
		t.Fatal(err)
	}
	e.client.CloseIdleConnections() // the old server closes its idle keep-alive connections
	if status, _, _ = e.get(t, e.client, path, nil); status != http.StatusUnauthorized {
		t.Fatalf("ticket spent before a reload: %d after it", status)
	}
	fresh := e.ticket(t, "sandbox-a1", tickets.KindApp, tickets.PermRead)
	if status, _, _ = e.get(t, e.client, "/sandboxes/sandbox-a1/app/?ticket="+fresh, nil); status != http.StatusOK {
		t.Fatalf("fresh ticket after the reload: %d", status)
	}

	// The access log (query filter) holds the requests but not one ticket.
	deadline := time.Now().Add(testenv.WaitLimit)
	var logged []byte
	for time.Now().Before(deadline) {
		logged, _ = os.ReadFile(e.accessLog)
		if bytes.Count(logged, []byte("\n")) >= 7 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !bytes.Contains(logged, []byte("/sandboxes/sandbox-a1/app/3000/index.html")) {
		t.Fatalf("access log lacks the request:\n%s", logged)
	}
	for _, secret := range []string{tok, other, cdp, w, fresh} {
		if bytes.Contains(logged, []byte(secret)) || bytes.Contains(logged, []byte(strings.Split(secret, ".")[2])) {
			t.Fatalf("access log contains a ticket:\n%s", logged)
		}
	}
}

// createSandbox creates a sandbox through the admin API and returns its id.
func (e *edgeGateway) createSandbox(t *testing.T) string {
	t.Helper()
	return e.g.CreateSandbox(t, "py", "edge-test")
}

func (e *edgeGateway) sandboxStatus(t *testing.T, id string) string {
	t.Helper()
	resp, err := http.Get("http://" + e.g.AdminAddr + "/sandboxes/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&sb)
	return sb.Status
}

// agentReached asserts that a response came from the sandbox's agent, authenticated with the token the gateway
// injected: the agent's own error envelope (it has "retryable"; the gateway's has "request_id"), not its 401, and
// naming what the rewritten request asked for.
func agentReached(t *testing.T, status int, body, want string) {
	t.Helper()
	if status == http.StatusUnauthorized || !strings.Contains(body, `"retryable"`) || !strings.Contains(body, want) {
		t.Fatalf("want the agent's answer mentioning %s (gateway reached the agent with its token), got %d %s", want, status, body)
	}
}

// TestEdgeProxyStartsIdleSandboxAndReportsDeath drives the proxy route against a real sandbox: the request reaches
// the agent with the injected token at the rewritten path, an idle-stopped sandbox is started inside the request,
// and a killed container answers with a typed container_died error instead of a bare 502.
func TestEdgeProxyStartsIdleSandboxAndReportsDeath(t *testing.T) {
	e := startEdge(t, `	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*`, true)
	id := e.createSandbox(t)

	status, body, _ := e.get(t, e.client, "/sandboxes/"+id+"/app/8000/hello%2Fworld?q=1&ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil)
	agentReached(t, status, body, `"port":8000`) // nothing listens there: the agent's typed 502 names the port

	// No ticket, a client-supplied agent token: refused by the gateway before the agent.
	status, body, _ = e.get(t, e.client, "/sandboxes/"+id+"/app/", http.Header{"X-Sandgate-Token": {"guess"}})
	if status != http.StatusUnauthorized || strings.Contains(body, "agent") {
		t.Fatalf("no ticket: %d %s", status, body)
	}

	// Idle timeout (4s, GC every 1s) stops the container; the next request starts it again. The deadline only
	// guards against a hang.
	deadline := time.Now().Add(5 * time.Minute)
	for e.sandboxStatus(t, id) != "idle" {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox never went idle (status %s)", e.sandboxStatus(t, id))
		}
		time.Sleep(500 * time.Millisecond)
	}
	status, body, _ = e.get(t, e.client, "/sandboxes/"+id+"/vnc/websockify?ticket="+e.ticket(t, id, tickets.KindVNC, tickets.PermRead), nil)
	agentReached(t, status, body, `"code"`) // a shell-only profile has no VNC: the agent says so
	if s := e.sandboxStatus(t, id); s != "ready" {
		t.Fatalf("after a request to an idle sandbox its status is %s", s)
	}

	// Kill the container behind the Manager's back: the route tells the page its sandbox died (a retryable 503
	// naming the reason while the sandbox is rebuilt on its workspace), and the page then reaches it again.
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label="+e.ns+".id="+id).Output()
	if err != nil || len(strings.Fields(string(out))) != 1 {
		t.Fatalf("finding the container: %v %q", err, out)
	}
	if out, err := exec.Command("docker", "kill", strings.TrimSpace(string(out))).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	deadline = time.Now().Add(5 * time.Minute) // the engine's die event on a busy machine; a hang guard only
	var resp *http.Response
	for {
		status, body, resp = e.get(t, e.client, "/sandboxes/"+id+"/app/8000/?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil)
		if status == http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"session_not_ready"`) || !strings.Contains(body, `"reason":"sigkill"`) ||
		!strings.Contains(body, `"recovering":true`) || !strings.Contains(body, `"request_id"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("dead sandbox answered %d %s", status, body)
	}
	deadline = time.Now().Add(90 * time.Second)
	for {
		status, body, _ = e.get(t, e.client, "/sandboxes/"+id+"/app/8000/?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil)
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	agentReached(t, status, body, `"port":8000`) // rebuilt: the agent answers again
	if s := e.sandboxStatus(t, id); s != "ready" {
		t.Fatalf("after the rebuild its status is %s", s)
	}
}
