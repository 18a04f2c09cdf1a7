package caddymodule_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

const (
	e2bKeyAlice = "e2b-test-key-alice-0123456789"
	e2bKeyBob   = "e2b-test-key-bob-0123456789"
)

// e2bExample runs the gateway on Caddyfile.example as shipped, with two owners' keys stored in its store before it
// starts (as keys a console or an earlier run stored), and returns it with the E2B environment an E2B user sets.
func e2bExample(t *testing.T) (*testenv.Gateway, []string, string) {
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
	httpsPort := testenv.FreePort(t)
	g := testenv.StartGateway(t, string(example), testenv.GatewayOptions{DataHome: xdg, Env: []string{
		fmt.Sprintf("SANDGATE_HTTP_PORT=%d", testenv.FreePort(t)),
		fmt.Sprintf("SANDGATE_HTTPS_PORT=%d", httpsPort),
		fmt.Sprintf("SANDGATE_BAY_PORT=%d", testenv.FreePort(t)),
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
	return g, env, ns
}

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
	EnvdNoToken      int      `json:"envdNoToken"`
	EnvdBadToken     int      `json:"envdBadToken"`
	HeaderRouted     int      `json:"headerRoutedNoToken"`
	SignedURLRefused bool     `json:"signedURLRefused"`
	ForgedSignature  int      `json:"forgedSignature"`
	BHasTrafficToken bool     `json:"bHasTrafficToken"`
	AGetsB           string   `json:"aGetsB"`
	ASetsTimeoutOfB  string   `json:"aSetsTimeoutOfB"`
	AKillsB          bool     `json:"aKillsB"`
	AListsB          bool     `json:"aListsB"`
	ATokenOnB        int      `json:"aTokenOnB"`
	BPortNoToken     int      `json:"bPortNoToken"`
	BPortAToken      int      `json:"bPortAToken"`
	BCodeNoToken     int      `json:"bCodeNoToken"`
	BStillThere      string   `json:"bStillThere"`
	BKilled          bool     `json:"bKilled"`
	WrongKey         string   `json:"wrongKey"`
	WrongKeyIsAuth   bool     `json:"wrongKeyIsAuth"`
	UnknownTemplate  string   `json:"unknownTemplate"`
	AutoPause        string   `json:"autoPause"`
	Killed           bool     `json:"killed"`
	KilledAgain      bool     `json:"killedAgain"`
	GoneInfo         bool     `json:"goneInfo"`
	GoneEnvd         int      `json:"goneEnvd"`
	Fatal            string   `json:"fatal"`
}

// TestE2BSDKControlPlane drives the real npm e2b SDK, unmodified, against Caddyfile.example with E2B_API_URL and
// E2B_DOMAIN pointed at it: create with metadata, envs and a timeout; getInfo; list by (triple-encoded) metadata;
// setTimeout that shortens; pause (and pause again: false) and connect; kill, and kill of a gone sandbox (false).
// The attacks: owner A's key cannot read, extend, list or kill owner B's sandbox; envd without a token, with a
// wrong one, with A's token on B's host, or with a forged file signature is refused with 401 before anything is
// forwarded; B's private ports refuse a request without B's traffic token. A wrong key is AuthenticationError, an
// unknown template E2B's 404 that leaves no sandbox behind.
func TestE2BSDKControlPlane(t *testing.T) {
	_, env, ns := e2bExample(t)
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
	if !strings.Contains(rep.AutoPause, "400") || !strings.Contains(rep.AutoPause, "autoPause") {
		t.Errorf("autoPause: %q, want a 400 naming it", rep.AutoPause)
	}
	if !rep.Killed || rep.KilledAgain || !rep.GoneInfo || rep.GoneEnvd != 502 {
		t.Errorf("kill %v, kill again %v, getInfo after kill is SandboxNotFoundError %v, envd after kill %d (want 502)",
			rep.Killed, rep.KilledAgain, rep.GoneInfo, rep.GoneEnvd)
	}
	// Nothing is left behind: the refused creates (unknown template, autoPause) made no container, and both
	// sandboxes are gone. The warm member of python-default has an ordinary id and is not counted.
	ps, err := exec.Command("docker", "ps", "-a", "--format", "{{.Label \""+ns+".id\"}}", "--filter", "label="+ns+".id").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(ps)) {
		if strings.HasPrefix(id, sandboxes.UnguessableIDPrefix) {
			t.Errorf("an E2B sandbox's container is left: %s", id)
		}
	}
}
