package opensandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
	"github.com/sandgate/sandgate/sandboxes/service"
)

const (
	keyAlice = "key-alice"
	keyBob   = "key-bob"
	keyAdmin = "key-admin"
)

type rig struct {
	t      *testing.T
	m      *sandboxes.Manager
	engine *sandboxestest.Engine
	srv    *httptest.Server
	agent  *httptest.Server
	agentC chan *http.Request
}

func newRig(t *testing.T) *rig {
	rg := &rig{t: t, agentC: make(chan *http.Request, 16)}
	rg.agent = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" { // the Manager's readiness probe
			return
		}
		rg.agentC <- r.Clone(r.Context())
		if strings.HasSuffix(r.URL.Path, "/hostile.html") {
			// A replaced agent: a page that would register a service worker for the whole shared origin and
			// plant cookies on it.
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Service-Worker-Allowed", "/")
			w.Header().Add("Set-Cookie", "sandgate_console=planted; Path=/")
			w.Header().Set("Clear-Site-Data", `"cookies"`)
			_, _ = io.WriteString(w, "<script>navigator.serviceWorker.register('sw.js',{scope:'/'})</script>")
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "agent:"+r.URL.EscapedPath())
	}))
	t.Cleanup(rg.agent.Close)
	rg.m, rg.engine = newManager(t, strings.TrimPrefix(rg.agent.URL, "http://"))
	keys, err := service.NewKeyRing([]service.KeyConfig{
		{Key: keyAlice, Owner: "alice"}, {Key: keyBob, Owner: "bob"}, {Key: keyAdmin, Owner: "ops", Admin: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Service: service.New(service.Config{Sandboxes: rg.m}), Keys: keys})
	rg.srv = httptest.NewServer(h)
	t.Cleanup(rg.srv.Close)
	return rg
}

func (rg *rig) do(method, path, key, body string) (*http.Response, map[string]any) {
	rg.t.Helper()
	req, _ := http.NewRequest(method, rg.srv.URL+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set(APIKeyHeader, key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rg.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{"_raw": string(b)}
	}
	if resp.Header.Get(requestIDHeader) == "" {
		rg.t.Errorf("%s %s: no X-Request-ID", method, path)
	}
	return resp, m
}

// fastGPTBody is FastGPT's create body (runtimeProfile/opensandbox.ts) with our image.
const fastGPTBody = `{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["/home/sandbox/entrypoint.sh"],"timeout":3600,
 "resourceLimits":{"cpu":"2","memory":"4096Mi"},"env":{"FASTGPT_SESSION_ID":"s1","IDE_AGENT_ENABLED":"true"},
 "metadata":{"sessionId":"s1"},"networkPolicy":{"defaultAction":"allow","egress":[
  {"action":"deny","target":"localhost"},{"action":"deny","target":"host.docker.internal"},
  {"action":"deny","target":"host.orb.internal"},{"action":"deny","target":"docker.orb.internal"},
  {"action":"deny","target":"gateway.orb.internal"},{"action":"deny","target":"proxyproxy.orb.internal"},
  {"action":"deny","target":"*.orb.internal"},{"action":"deny","target":"*.orb.local"}]},
 "secureAccess":false,"extensions":{}}`

func (rg *rig) create(key, body string) string {
	rg.t.Helper()
	resp, m := rg.do("POST", "/v1/sandboxes", key, body)
	if resp.StatusCode != http.StatusAccepted {
		rg.t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	return m["id"].(string)
}

// made is sandbox id as the Manager holds it once ready, and the environment its container was created with
// (less the Manager's own variables for its agent): what the create asked the core for.
func (rg *rig) made(id string) (*sandboxes.Sandbox, map[string]string) {
	rg.t.Helper()
	sandboxestest.WaitStatus(rg.t, rg.m, id, sandboxes.StatusReady)
	sb, err := rg.m.Get(rg.t.Context(), id)
	if err != nil {
		rg.t.Fatal(err)
	}
	env, ok := rg.engine.CallerEnv(id)
	if !ok {
		rg.t.Fatalf("sandbox %s has no container", id)
	}
	return sb, env
}

// spec is the container sandbox id was created with (made first waits for it).
func (rg *rig) spec(id string) sandboxes.ContainerSpec {
	rg.t.Helper()
	spec, ok := rg.engine.Spec(id)
	if !ok {
		rg.t.Fatalf("sandbox %s has no container", id)
	}
	return spec
}

// noneMade fails the test if any create reached the core: the Manager holds no sandbox, the engine no container.
func (rg *rig) noneMade() {
	rg.t.Helper()
	all, _, err := rg.m.List(rg.t.Context(), sandboxes.ListOptions{})
	if err != nil || len(all) != 0 || rg.engine.Containers() != 0 {
		rg.t.Fatalf("refused creates reached the core: %d sandboxes (%v), %d containers", len(all), err, rg.engine.Containers())
	}
}

func TestCreateWithFastGPTsBody(t *testing.T) {
	rg := newRig(t)
	resp, m := rg.do("POST", "/v1/sandboxes", keyAlice, fastGPTBody)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	id := m["id"].(string)
	if loc := resp.Header.Get("Location"); loc != "/v1/sandboxes/"+id {
		t.Errorf("Location %q", loc)
	}
	if st := m["status"].(map[string]any)["state"]; st != StatePending {
		t.Errorf("state %v", st)
	}
	if md := m["metadata"].(map[string]any); len(md) != 1 || md["sessionId"] != "s1" {
		t.Errorf("metadata answered %v (reserved keys must not show)", md)
	}
	if ep := m["entrypoint"].([]any); len(ep) != 1 || ep[0] != "/home/sandbox/entrypoint.sh" {
		t.Errorf("entrypoint %v", ep)
	}
	if m["expiresAt"] == nil || m["createdAt"] == nil {
		t.Errorf("times missing: %v", m)
	}
	c, env := rg.made(id)
	if c.Profile != "base" || c.Owner != "alice" || c.ExpiresAt == nil || c.ExpiresAt.Sub(c.CreatedAt) != time.Hour || env["FASTGPT_SESSION_ID"] != "s1" {
		t.Errorf("core made %+v env %v", c, env)
	}
	var svcs []sandboxes.Service
	if err := json.Unmarshal([]byte(env[sandboxes.EnvServices]), &svcs); err != nil || len(svcs) != 1 ||
		svcs[0].Command != "exec '/home/sandbox/entrypoint.sh'" || svcs[0].Restart != "never" {
		t.Errorf("entrypoint service %v %v", svcs, err)
	}
	// The SDK's default entrypoint only keeps PID 1 alive: no service, so a warm member can be claimed.
	keep := rg.create(keyAlice, `{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["tail","-f","/dev/null"],"timeout":600}`)
	if _, env := rg.made(keep); len(env) != 0 {
		t.Errorf("keep-alive entrypoint made env %v", env)
	}
}

func TestCreateRefusesWhatItCannotHonour(t *testing.T) {
	rg := newRig(t)
	img := `"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["sh"]`
	tests := []struct {
		name, body, code string
		status           int
	}{
		{"foreign image", `{"image":{"uri":"python:3.11"},"entrypoint":["python"]}`, CodeImageNotSupported, 400},
		{"registry auth", `{"image":{"uri":"sandgate/sandbox:base","auth":{"username":"u"}},"entrypoint":["sh"]}`, CodeImageNotSupported, 400},
		{"no entrypoint", `{"image":{"uri":"sandgate/sandbox:base"}}`, CodeInvalidEntrypoint, 400},
		{"snapshot", `{"snapshotId":"snap-1"}`, CodeAPINotSupported, 501},
		{"volumes", `{` + img + `,"volumes":[{"name":"v","host":{"path":"/etc"},"mountPath":"/x"}]}`, CodeInvalidRequest, 400},
		{"short timeout", `{` + img + `,"timeout":5}`, CodeInvalidRequest, 400},
		{"agent env", `{` + img + `,"env":{"SANDGATE_SERVICES":"[]"}}`, CodeInvalidRequest, 400},
		{"reserved metadata", `{` + img + `,"metadata":{"opensandbox.io/image":"x"}}`, CodeInvalidMetadata, 400},
		{"bad cpu", `{` + img + `,"resourceLimits":{"cpu":"lots"}}`, CodeInvalidRequest, 400},
		{"gpu", `{` + img + `,"resourceLimits":{"gpu":"1"}}`, CodeInvalidRequest, 400},
		{"public deny under allow", `{` + img + `,"networkPolicy":{"defaultAction":"allow","egress":[{"action":"deny","target":"evil.example.com"}]}}`, CodePolicyNotEnforceable, 400},
		{"open the host", `{` + img + `,"networkPolicy":{"defaultAction":"allow","egress":[{"action":"allow","target":"host.docker.internal"}]}}`, CodePolicyNotEnforceable, 400},
		{"allow under deny", `{` + img + `,"networkPolicy":{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}}`, CodePolicyNotEnforceable, 400},
		{"deny all on a bridge", `{"image":{"uri":"sandgate/sandbox:web"},"entrypoint":["sh"],"networkPolicy":{"defaultAction":"deny"}}`, CodePolicyNotEnforceable, 400},
		{"bad rule", `{` + img + `,"networkPolicy":{"egress":[{"action":"maybe","target":"x.org"}]}}`, CodeInvalidRequest, 400},
		{"credential proxy", `{` + img + `,"credentialProxy":{"enabled":true}}`, CodeInvalidRequest, 400},
		{"pool", `{` + img + `,"extensions":{"poolRef":"p"}}`, CodeInvalidRequest, 400},
		{"platform", `{` + img + `,"platform":{"os":"windows","arch":"amd64"}}`, CodeInvalidRequest, 400},
		{"not json", `{`, CodeInvalidRequest, 400},
	}
	for _, tc := range tests {
		resp, m := rg.do("POST", "/sandboxes", keyAlice, tc.body)
		if resp.StatusCode != tc.status || m["code"] != tc.code || m["message"] == "" {
			t.Errorf("%s: %d %v, want %d %s", tc.name, resp.StatusCode, m, tc.status, tc.code)
		}
	}
	rg.noneMade()
	if resp, m := rg.do("POST", "/sandboxes", keyAlice, `{"image":{"uri":"sandgate/sandbox:proxied"},"entrypoint":["sh"],"networkPolicy":{"egress":[{"action":"allow","target":"10.1.2.3"}]}}`); resp.StatusCode != 400 || m["code"] != CodePolicyNotEnforceable {
		t.Errorf("a proxied profile opening a private address: %d %v", resp.StatusCode, m)
	}
	// Enforceable: deny-all where the profile reaches nothing.
	rg.create(keyAlice, `{"image":{"uri":"sandgate/sandbox:sealed"},"entrypoint":["sh"],"networkPolicy":{"defaultAction":"deny"}}`)
	rg.create(keyAlice, `{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["sh"],"networkPolicy":{"defaultAction":"deny","egress":[{"action":"deny","target":"10.0.0.0/8"}]}}`)
}

func TestAuthAndOwners(t *testing.T) {
	rg := newRig(t)
	id := rg.create(keyAlice, fastGPTBody)
	for _, tc := range []struct {
		name, key, code string
		status          int
	}{
		{"no key", "", CodeMissingAPIKey, 401},
		{"wrong key", "nope", CodeInvalidAPIKey, 401},
		{"other owner", keyBob, CodeSandboxNotFound, 404},
	} {
		for _, path := range []string{"/sandboxes/" + id, "/v1/sandboxes/" + id} {
			resp, m := rg.do("GET", path, tc.key, "")
			if resp.StatusCode != tc.status || m["code"] != tc.code {
				t.Errorf("%s %s: %d %v", tc.name, path, resp.StatusCode, m)
			}
		}
	}
	// Bob cannot act on Alice's sandbox in any way; each answer is the not-found of a missing sandbox.
	for _, op := range []struct{ method, path, body string }{
		{"DELETE", "/v1/sandboxes/" + id, ""}, {"PATCH", "/v1/sandboxes/" + id + "/metadata", `{"a":"b"}`},
		{"POST", "/v1/sandboxes/" + id + "/pause", ""}, {"POST", "/v1/sandboxes/" + id + "/resume", ""},
		{"POST", "/v1/sandboxes/" + id + "/renew-expiration", `{"expiresAt":"2099-01-01T00:00:00Z"}`},
		{"GET", "/v1/sandboxes/" + id + "/endpoints/44772", ""},
	} {
		resp, m := rg.do(op.method, op.path, keyBob, op.body)
		if resp.StatusCode != 404 || m["code"] != CodeSandboxNotFound {
			t.Errorf("bob %s %s: %d %v", op.method, op.path, resp.StatusCode, m)
		}
	}
	if _, err := rg.m.Get(t.Context(), id); err != nil {
		t.Fatal("bob's delete removed alice's sandbox")
	}
	if resp, m := rg.do("GET", "/v1/sandboxes", keyBob, ""); resp.StatusCode != 200 || len(m["items"].([]any)) != 0 {
		t.Errorf("bob lists %v", m)
	}
	if resp, m := rg.do("GET", "/v1/sandboxes/"+id, keyAdmin, ""); resp.StatusCode != 200 {
		t.Errorf("admin get: %d %v", resp.StatusCode, m)
	}
	if resp, m := rg.do("GET", "/v1/nothing", keyAlice, ""); resp.StatusCode != 404 || m["code"] != CodeNotFound {
		t.Errorf("unknown route: %d %v", resp.StatusCode, m)
	}
	if resp, m := rg.do("PUT", "/v1/sandboxes", keyAlice, ""); resp.StatusCode != 405 {
		t.Errorf("wrong method: %d %v", resp.StatusCode, m)
	}
	if resp, m := rg.do("POST", "/v1/sandboxes/"+id+"/snapshots", keyAlice, ""); resp.StatusCode != 501 || m["code"] != CodeAPINotSupported {
		t.Errorf("snapshots: %d %v", resp.StatusCode, m)
	}
	if resp, m := rg.do("GET", "/health", "", ""); resp.StatusCode != 200 || m["_raw"] != "OK" {
		t.Errorf("health: %d %v", resp.StatusCode, m)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	rg := newRig(t)
	var s1 []string
	for i := range 5 {
		sess := "s1"
		if i%2 == 1 {
			sess = "s2"
		}
		id := rg.create(keyAlice, `{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["sh"],"metadata":{"sessionId":"`+sess+`","n":"x"}}`)
		if sess == "s1" {
			s1 = append(s1, id)
		}
		if i == 0 {
			// The first is running; the engine starts none of the others, which stay pending.
			sandboxestest.WaitStatus(t, rg.m, id, sandboxes.StatusReady)
			rg.engine.BlockStarts(t)
		}
	}
	rg.create(keyBob, `{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["sh"],"metadata":{"sessionId":"s1"}}`)
	resp, m := rg.do("GET", "/v1/sandboxes?metadata=sessionId%3Ds1%26n%3Dx&pageSize=2", keyAlice, "")
	pg := m["pagination"].(map[string]any)
	if resp.StatusCode != 200 || len(m["items"].([]any)) != 2 || pg["totalItems"] != 3.0 || pg["totalPages"] != 2.0 || pg["hasNextPage"] != true {
		t.Fatalf("page 1: %v", m)
	}
	_, m = rg.do("GET", "/v1/sandboxes?metadata=sessionId%3Ds1&pageSize=2&page=2", keyAlice, "")
	if pg := m["pagination"].(map[string]any); len(m["items"].([]any)) != 1 || pg["hasNextPage"] != false {
		t.Fatalf("page 2: %v", m)
	}
	_, m = rg.do("GET", "/v1/sandboxes?state=Running&state=Paused&metadata=sessionId%3Ds1", keyAlice, "")
	if items := m["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != s1[0] {
		t.Fatalf("state filter: %v", m)
	}
	for _, q := range []string{"page=0", "pageSize=1000", "metadata=opensandbox.io%2Fimage%3Dx", "metadata=%zz"} {
		if resp, m := rg.do("GET", "/v1/sandboxes?"+q, keyAlice, ""); resp.StatusCode != 400 {
			t.Errorf("%s: %d %v", q, resp.StatusCode, m)
		}
	}
}

func TestPatchPauseResumeRenew(t *testing.T) {
	rg := newRig(t)
	release := rg.engine.BlockStarts(t) // it stays starting until released
	id := rg.create(keyAlice, fastGPTBody)
	S := "/v1/sandboxes/" + id
	resp, m := rg.do("PATCH", S+"/metadata", keyAlice, `{"team":"x","sessionId":null}`)
	if md := m["metadata"].(map[string]any); resp.StatusCode != 200 || md["team"] != "x" || md["sessionId"] != nil {
		t.Fatalf("patch: %d %v", resp.StatusCode, m)
	}
	if resp, m := rg.do("PATCH", S+"/metadata", keyAlice, `{"opensandbox.io/entrypoint":"x"}`); resp.StatusCode != 400 || m["code"] != CodeInvalidMetadata {
		t.Fatalf("reserved patch: %d %v", resp.StatusCode, m)
	}
	// Starting: neither pause nor resume.
	if resp, m := rg.do("POST", S+"/pause", keyAlice, ""); resp.StatusCode != 409 || m["code"] != CodeSandboxNotRunning {
		t.Fatalf("pause while starting: %d %v", resp.StatusCode, m)
	}
	release()
	sandboxestest.WaitStatus(t, rg.m, id, sandboxes.StatusReady)
	if resp, m := rg.do("POST", S+"/resume", keyAlice, ""); resp.StatusCode != 409 || m["code"] != CodeSandboxNotPaused {
		t.Fatalf("resume while running: %d %v", resp.StatusCode, m)
	}
	if resp, _ := rg.do("POST", S+"/pause", keyAlice, ""); resp.StatusCode != 202 {
		t.Fatalf("pause: %d", resp.StatusCode)
	}
	if _, m := rg.do("GET", S, keyAlice, ""); m["status"].(map[string]any)["state"] != StatePaused {
		t.Fatalf("after pause: %v", m)
	}
	if resp, _ := rg.do("POST", S+"/resume", keyAlice, ""); resp.StatusCode != 202 {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	if _, m := rg.do("GET", S, keyAlice, ""); m["status"].(map[string]any)["state"] != StateRunning {
		t.Fatalf("after resume: %v", m)
	}
	sb, _ := rg.m.Get(t.Context(), id)
	want := sb.ExpiresAt.Add(time.Hour).UTC().Truncate(time.Second)
	resp, m = rg.do("POST", S+"/renew-expiration", keyAlice, `{"expiresAt":"`+want.Format(time.RFC3339)+`"}`)
	if got, _ := time.Parse(time.RFC3339Nano, m["expiresAt"].(string)); resp.StatusCode != 200 || !got.Equal(want) {
		t.Fatalf("renew: %d %v want %v", resp.StatusCode, m, want)
	}
	for _, tc := range []struct{ body, code string }{
		{`{"expiresAt":"2001-01-01T00:00:00Z"}`, CodeInvalidExpiration},
		{`{"expiresAt":"soon"}`, CodeInvalidExpiration},
		{`{"expiresAt":"` + want.Add(-time.Minute).Format(time.RFC3339) + `"}`, CodeExpirationNotExtended},
	} {
		if _, m := rg.do("POST", S+"/renew-expiration", keyAlice, tc.body); m["code"] != tc.code {
			t.Errorf("renew %s: %v", tc.body, m)
		}
	}
	if resp, _ := rg.do("DELETE", S, keyAlice, ""); resp.StatusCode != 204 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if resp, m := rg.do("GET", S, keyAlice, ""); resp.StatusCode != 404 || m["code"] != CodeSandboxNotFound {
		t.Fatalf("after delete: %d %v", resp.StatusCode, m)
	}
}

// TestNetworkPolicyOnAProxiedProfile: where the egress proxy carries everything, a policy of names becomes the
// sandbox's own rules there.
func TestNetworkPolicyOnAProxiedProfile(t *testing.T) {
	rg := newRig(t)
	denyID := rg.create(keyAlice, `{"image":{"uri":"sandgate/sandbox:proxied"},"entrypoint":["sh"],"networkPolicy":{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"},{"action":"allow","target":"*.example.com"},{"action":"deny","target":"bad.example.com"}]}}`)
	allowID := rg.create(keyAlice, `{"image":{"uri":"sandgate/sandbox:proxied"},"entrypoint":["sh"],"networkPolicy":{"defaultAction":"allow","egress":[{"action":"deny","target":"evil.org"},{"action":"deny","target":"localhost"},{"action":"deny","target":"10.0.0.0/8"}]}}`)
	denySB, _ := rg.made(denyID)
	allowSB, _ := rg.made(allowID)
	deny, allow := denySB.Egress, allowSB.Egress
	if deny == nil || deny.AllowAnyName || strings.Join(deny.Allow, ",") != "pypi.org,*.example.com" || strings.Join(deny.Deny, ",") != "bad.example.com" {
		t.Errorf("default deny: %+v", deny)
	}
	if allow == nil || !allow.AllowAnyName || strings.Join(allow.Deny, ",") != "evil.org,localhost" {
		t.Errorf("default allow: %+v", allow)
	}
	if resp, m := rg.do("POST", "/sandboxes", keyAlice, `{"image":{"uri":"sandgate/sandbox:proxied"},"entrypoint":["sh"],"networkPolicy":{"defaultAction":"allow","egress":[{"action":"deny","target":"93.184.216.34"}]}}`); resp.StatusCode != 400 || m["code"] != CodePolicyNotEnforceable {
		t.Errorf("deny of a public address: %d %v", resp.StatusCode, m)
	}
	// FastGPT's policy on a profile without the proxy needs nothing per sandbox.
	if sb, _ := rg.made(rg.create(keyAlice, fastGPTBody)); sb.Egress != nil {
		t.Errorf("address-policy-only create got %+v", sb.Egress)
	}
}
