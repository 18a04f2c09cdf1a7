package caddymodule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

const (
	e2bKeyAlice = "e2b-test-key-alice-0123456789"
	e2bKeyBob   = "e2b-test-key-bob-0123456789"
)

// e2bExample runs the gateway on Caddyfile.example as shipped, with two owners' keys stored in its store before it
// starts (as keys a console or an earlier run stored), and returns it with the E2B environment an E2B user sets.
func e2bExample(t *testing.T) (*testenv.Gateway, []string, string, e2bPorts) {
	t.Helper()
	testenv.Integration(t)
	testenv.ShippedImage(t, "base")
	testenv.Runsc(t) // the example's python-isolated profile needs it
	example, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique("sge2b")
	testenv.RemoveNamespace(t, ns)
	xdg := t.TempDir()
	st := sandboxes.NewBoltStore(filepath.Join(xdg, "caddy", "sandgate", ns+".db"))
	for key, owner := range map[string]string{e2bKeyAlice: "alice", e2bKeyBob: "bob"} {
		if err := st.PutKey(sandboxes.StoredKey{Hash: service.HashKey(key), Owner: owner, Active: true, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	httpsPort, bayPort := testenv.FreePort(t), testenv.FreePort(t)
	g := testenv.StartGateway(t, string(example), testenv.GatewayOptions{DataHome: xdg, Env: []string{
		fmt.Sprintf("SANDGATE_HTTP_PORT=%d", testenv.FreePort(t)),
		fmt.Sprintf("SANDGATE_HTTPS_PORT=%d", httpsPort),
		fmt.Sprintf("SANDGATE_BAY_PORT=%d", bayPort),
		fmt.Sprintf("SANDGATE_OPENSANDBOX_PORT=%d", testenv.FreePort(t)),
		"SANDGATE_NAMESPACE=" + ns,
		"SANDGATE_TICKET_SECRET=e2b-test-secret-that-is-32-bytes-long",
	}})
	ca, err := g.WaitRootCA(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The HTTPS site answers once its certificate is issued: poll the API's health, trusting only Caddy's CA.
	https := g.HTTPSClient(t, t.Context(), 5*time.Second)
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		resp, err := https.Get(fmt.Sprintf("https://localhost:%d/e2b/health", httpsPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the E2B API never answered: %v\n%s", err, g.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	env := []string{
		fmt.Sprintf("E2B_API_URL=https://localhost:%d/e2b", httpsPort),
		fmt.Sprintf("E2B_DOMAIN=sandbox.localhost:%d", httpsPort),
		"E2B_API_KEY=" + e2bKeyAlice,
		"NODE_EXTRA_CA_CERTS=" + ca,
	}
	return g, env, ns, e2bPorts{https: httpsPort, bay: bayPort}
}

type e2bPorts struct{ https, bay int }

// e2bControlReport is what testdata/e2b_sdk_control.cjs prints.
type e2bControlReport struct {
	ID          string `json:"id"`
	EnvdVersion string `json:"envdVersion"`
	Domain      string `json:"domain"`
	HasToken    bool   `json:"hasToken"`
	Info        struct {
		State      string            `json:"state"`
		TemplateID string            `json:"templateId"`
		Metadata   map[string]string `json:"metadata"`
		LifetimeS  int               `json:"lifetimeS"`
	} `json:"info"`
	Listed           []string `json:"listed"`
	ListedWrong      int      `json:"listedWrong"`
	AfterSetTimeoutS int      `json:"afterSetTimeoutS"`
	Paused           bool     `json:"paused"`
	PausedState      string   `json:"pausedState"`
	PausedAgain      bool     `json:"pausedAgain"`
	ResumedState     string   `json:"resumedState"`
	Metrics          []struct {
		MemTotal int64 `json:"memTotal"`
		CPUCount int   `json:"cpuCount"`
		At       bool  `json:"at"`
	} `json:"metrics"`
	SnapshotListed  bool   `json:"snapshotListed"`
	FromSnapshot    bool   `json:"fromSnapshot"`
	SnapshotDeleted bool   `json:"snapshotDeleted"`
	SnapshotAgain   bool   `json:"snapshotDeletedAgain"`
	Fork            string `json:"fork"`
	ForkInfo        struct {
		TemplateID string `json:"templateId"`
		Run        string `json:"run"`
	} `json:"forkInfo"`
	EnvdNoToken      int    `json:"envdNoToken"`
	EnvdBadToken     int    `json:"envdBadToken"`
	HeaderRouted     int    `json:"headerRoutedNoToken"`
	SignedURLRefused bool   `json:"signedURLRefused"`
	ForgedSignature  int    `json:"forgedSignature"`
	BHasTrafficToken bool   `json:"bHasTrafficToken"`
	AGetsB           string `json:"aGetsB"`
	ASetsTimeoutOfB  string `json:"aSetsTimeoutOfB"`
	AKillsB          bool   `json:"aKillsB"`
	AListsB          bool   `json:"aListsB"`
	ATokenOnB        int    `json:"aTokenOnB"`
	BPortNoToken     int    `json:"bPortNoToken"`
	BPortAToken      int    `json:"bPortAToken"`
	BCodeNoToken     int    `json:"bCodeNoToken"`
	BStillThere      string `json:"bStillThere"`
	BKilled          bool   `json:"bKilled"`
	WrongKey         string `json:"wrongKey"`
	WrongKeyIsAuth   bool   `json:"wrongKeyIsAuth"`
	UnknownTemplate  string `json:"unknownTemplate"`
	Killed           bool   `json:"killed"`
	KilledAgain      bool   `json:"killedAgain"`
	GoneInfo         bool   `json:"goneInfo"`
	GoneEnvd         int    `json:"goneEnvd"`
	Fatal            string `json:"fatal"`
}

// TestE2BSDKControlPlane drives the real npm e2b SDK, unmodified, against Caddyfile.example with E2B_API_URL and
// E2B_DOMAIN pointed at it: create with metadata, envs and a timeout; getInfo; list by (triple-encoded) metadata;
// setTimeout that shortens; pause (and pause again: false) and connect; a snapshot (listed, created from, deleted)
// and a fork; kill, and kill of a gone sandbox (false). A port of an E2B sandbox opens without a ticket, or with
// its traffic token when private, and the sandbox sees none of E2B's credentials.
// The attacks: owner A's key cannot read, extend, list or kill owner B's sandbox; envd without a token, with a
// wrong one, with A's token on B's host, or with a forged file signature is refused with 401 before anything is
// forwarded; B's private ports refuse a request without B's traffic token. A wrong key is AuthenticationError, an
// unknown template E2B's 404 that leaves no sandbox behind.
func TestE2BSDKControlPlane(t *testing.T) {
	g, env, _, ports := e2bExample(t)
	domain := strings.TrimPrefix(env[1], "E2B_DOMAIN=")
	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_sdk_control.cjs"), append(env, "OTHER_KEY="+e2bKeyBob)...)
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep e2bControlReport
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)

	if !strings.HasPrefix(rep.ID, sandboxes.UnguessableIDPrefix) || len(rep.ID) != len(sandboxes.UnguessableIDPrefix)+32 || strings.Contains(rep.ID, "-") {
		t.Errorf("sandbox id %q: want %s and 32 hex digits (128 random bits), no '-'", rep.ID, sandboxes.UnguessableIDPrefix)
	}
	if !rep.HasToken || rep.EnvdVersion != agentapi.E2BEnvdVersion || rep.Domain != domain {
		t.Errorf("create answer: token %v envdVersion %q domain %q (want %s)", rep.HasToken, rep.EnvdVersion, rep.Domain, domain)
	}
	if rep.Info.State != "running" || rep.Info.TemplateID != "base" || rep.Info.Metadata["who"] != "a b&c=d" ||
		len(rep.Info.Metadata) != 2 || rep.Info.LifetimeS < 590 || rep.Info.LifetimeS > 610 {
		t.Errorf("getInfo: %+v (want running, base, the tenant's metadata only, a 600 s lifetime)", rep.Info)
	}
	if len(rep.Listed) != 1 || rep.Listed[0] != rep.ID || rep.ListedWrong != 0 {
		t.Errorf("list by metadata: %v, a wrong value lists %d", rep.Listed, rep.ListedWrong)
	}
	if rep.AfterSetTimeoutS < 100 || rep.AfterSetTimeoutS > 125 {
		t.Errorf("setTimeout(120 s) left %d s (it may shorten)", rep.AfterSetTimeoutS)
	}
	if !rep.Paused || rep.PausedState != "paused" || rep.PausedAgain || rep.ResumedState != "running" {
		t.Errorf("pause %v state %q, pause again %v, after connect %q", rep.Paused, rep.PausedState, rep.PausedAgain, rep.ResumedState)
	}
	if len(rep.Metrics) != 1 || rep.Metrics[0].MemTotal != 1<<30 || rep.Metrics[0].CPUCount != 1 || !rep.Metrics[0].At {
		t.Errorf("getMetrics: %+v, want one current sample of python-default (1 CPU, 1 GiB)", rep.Metrics)
	}
	if !rep.SnapshotListed || !rep.FromSnapshot || !rep.SnapshotDeleted || rep.SnapshotAgain {
		t.Errorf("snapshots: listed %v, create from it %v, deleted %v, deleted again %v", rep.SnapshotListed, rep.FromSnapshot, rep.SnapshotDeleted, rep.SnapshotAgain)
	}
	if !strings.HasPrefix(rep.Fork, sandboxes.UnguessableIDPrefix) || rep.ForkInfo.TemplateID != "base" || rep.ForkInfo.Run != rep.Info.Metadata["run"] {
		t.Errorf("fork %q %+v: want a new E2B sandbox with its source's template and metadata", rep.Fork, rep.ForkInfo)
	}
	if rep.EnvdNoToken != 401 || rep.EnvdBadToken != 401 || rep.ATokenOnB != 401 || rep.ForgedSignature != 401 || rep.SignedURLRefused ||
		rep.HeaderRouted != 401 {
		t.Errorf("envd: no token %d, bad token %d, A's token on B %d, forged signature %d, header-routed %d (want 401s); signed URL refused %v",
			rep.EnvdNoToken, rep.EnvdBadToken, rep.ATokenOnB, rep.ForgedSignature, rep.HeaderRouted, rep.SignedURLRefused)
	}
	if !rep.BHasTrafficToken || rep.BPortNoToken != 403 || rep.BPortAToken != 403 || rep.BCodeNoToken != 403 {
		t.Errorf("B's private ports: token %v, no token %d, A's token %d, code interpreter %d (want 403s)",
			rep.BHasTrafficToken, rep.BPortNoToken, rep.BPortAToken, rep.BCodeNoToken)
	}
	if !strings.HasPrefix(rep.AGetsB, "SandboxNotFoundError") || !strings.HasPrefix(rep.ASetsTimeoutOfB, "SandboxNotFoundError") ||
		rep.AKillsB || rep.AListsB || rep.BStillThere != "running" || !rep.BKilled {
		t.Errorf("owner A on B's sandbox: get %q, setTimeout %q, kill %v, listed %v; B still %q, B kills %v",
			rep.AGetsB, rep.ASetsTimeoutOfB, rep.AKillsB, rep.AListsB, rep.BStillThere, rep.BKilled)
	}
	if !rep.WrongKeyIsAuth || !strings.Contains(rep.UnknownTemplate, "404") || !strings.Contains(strings.ToLower(rep.UnknownTemplate), "template") {
		t.Errorf("wrong key %q (AuthenticationError %v), unknown template %q", rep.WrongKey, rep.WrongKeyIsAuth, rep.UnknownTemplate)
	}
	if !rep.Killed || rep.KilledAgain || !rep.GoneInfo || rep.GoneEnvd != 502 {
		t.Errorf("kill %v, kill again %v, getInfo after kill is SandboxNotFoundError %v, envd after kill %d (want 502)",
			rep.Killed, rep.KilledAgain, rep.GoneInfo, rep.GoneEnvd)
	}
	// Nothing is left behind: the refused create (unknown template) made no sandbox, and every sandbox
	// the script made is gone (the admin endpoint lists them all; warm members are not sandboxes yet).
	resp, err := http.Get("http://" + g.AdminAddr + "/sandboxes?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	var left struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	err = json.NewDecoder(resp.Body).Decode(&left)
	resp.Body.Close()
	if err != nil || len(left.Items) != 0 {
		t.Errorf("sandboxes left after the script: %+v %v", left.Items, err)
	}
	e2bPortsPhase(t, g, ports)
}

// e2bEchoServer answers every GET with the request's headers as JSON, on port 8000 inside the sandbox.
const e2bEchoServer = `nohup python3 -c '
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = json.dumps(dict(self.headers)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
http.server.HTTPServer(("", 8000), H).serve_forever()
' >/tmp/echo.log 2>&1 &`

// e2bPortsPhase: a port of an E2B sandbox opens at {port}-{id}.{domain} without a ticket (public) or with its
// traffic token (private), and what reaches the sandbox carries none of E2B's credentials nor a client's forged
// gateway header. The server in the sandbox is started through the REST API with the same key.
func e2bPortsPhase(t *testing.T, g *testenv.Gateway, ports e2bPorts) {
	ctx := t.Context()
	https := g.HTTPSClient(t, ctx, 10*time.Second)
	https.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", ports.https)) // *.localhost is this machine
	}
	create := func(body string) (id, traffic string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("https://localhost:%d/e2b/v2/sandboxes", ports.https), strings.NewReader(body))
		req.Header.Set("X-API-Key", e2bKeyAlice)
		resp, err := https.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb struct {
			SandboxID          string  `json:"sandboxID"`
			TrafficAccessToken *string `json:"trafficAccessToken"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %v", resp.StatusCode, err)
		}
		if sb.TrafficAccessToken != nil {
			traffic = *sb.TrafficAccessToken
		}
		bay := client.New(fmt.Sprintf("http://127.0.0.1:%d", ports.bay), e2bKeyAlice)
		if res, err := bay.Shell(ctx, sb.SandboxID, e2bEchoServer, 30); err != nil {
			t.Fatalf("starting the echo server: %v %+v", err, res)
		}
		return sb.SandboxID, traffic
	}
	get := func(id string, hdr map[string]string) (int, map[string]string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://8000-%s.sandbox.localhost:%d/x", id, ports.https), nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := https.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		seen := map[string]string{}
		_ = json.NewDecoder(resp.Body).Decode(&seen)
		return resp.StatusCode, seen
	}
	// until waits for the server in the sandbox to listen (the agent answers 502 until then).
	until := func(id string, hdr map[string]string) (int, map[string]string) {
		deadline := time.Now().Add(testenv.WaitLimit)
		for {
			code, seen := get(id, hdr)
			if code != http.StatusBadGateway || time.Now().After(deadline) {
				return code, seen
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	pub, _ := create(`{"templateID":"base"}`)
	code, seen := until(pub, map[string]string{"X-Access-Token": "client-sent", "X-Sandgate-E2b-Env": `{"EVIL":"1"}`})
	if code != http.StatusOK {
		t.Fatalf("a public port answered %d", code)
	}
	t.Logf("public port: %d, the sandbox saw %d headers", code, len(seen))
	for k := range seen {
		if strings.EqualFold(k, "X-Access-Token") || strings.EqualFold(k, "X-Sandgate-E2b-Env") || strings.EqualFold(k, "E2b-Traffic-Access-Token") {
			t.Errorf("the sandbox's server saw %s", k)
		}
	}
	priv, traffic := create(`{"templateID":"base","network":{"allowPublicTraffic":false}}`)
	if code, _ := get(priv, nil); code != http.StatusForbidden {
		t.Errorf("a private port without the token answered %d", code)
	}
	code, seen = until(priv, map[string]string{"E2b-Traffic-Access-Token": traffic})
	if code != http.StatusOK {
		t.Fatalf("a private port with its token answered %d", code)
	}
	t.Logf("private port with its token: %d", code)
	for k := range seen {
		if strings.EqualFold(k, "E2b-Traffic-Access-Token") {
			t.Errorf("the sandbox's server saw its traffic token")
		}
	}
}
