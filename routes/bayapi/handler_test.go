package bayapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

const (
	keyAlice = "sk-bay-alice"
	keyBob   = "sk-bay-bob"
	keyAdmin = "sk-bay-admin"
)

// testAPI is Bay's API over the real Manager (sandboxestest.NewManagerIn) on an in-memory engine, with the test's
// clock and one store (the API's keys, history and exports, the Manager's sandboxes and cargos), and a fake agent.
type testAPI struct {
	srv    *httptest.Server
	h      *Handler
	mgr    *sandboxes.Manager
	engine *sandboxestest.Engine
	agent  *fakeAgent
	clock  *sandboxestest.Clock
	store  *sandboxes.BoltStore
}

// testConfig is the handler's configuration, its service's and its Manager's, for a test to change before they are
// built.
type testConfig struct {
	Config
	svc service.Config
	// core and mcfg configure the Manager (by default Bay's two profiles, collected hourly so that a test moving
	// its clock stops nothing behind its back, on the test's clock); whole serves the Manager itself, with its
	// collector and other optional surfaces, instead of lifecycleOnly.
	core  sandboxes.Config
	mcfg  sandboxes.ManagerConfig
	whole bool
}

func newTestAPI(t *testing.T, mutate ...func(*testConfig)) *testAPI {
	t.Helper()
	return newTestAPIAt(t, filepath.Join(t.TempDir(), "api.db"), mutate...)
}

// newTestAPIAt is newTestAPI with its store at path.
func newTestAPIAt(t *testing.T, path string, mutate ...func(*testConfig)) *testAPI {
	t.Helper()
	st := sandboxes.NewBoltStore(path)
	t.Cleanup(func() { st.Close() })
	clock := sandboxestest.NewClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	keys, err := service.LoadKeys(context.Background(), st, service.KeySetup{ConfigKey: keyAlice, Extra: []service.KeyConfig{
		{Key: keyBob, Owner: "bob"}, {Key: keyAdmin, Owner: "ops", Admin: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	agent := newFakeAgent()
	cfg := testConfig{
		Config: Config{Keys: keys, Version: "test", Now: clock.Now},
		svc: service.Config{Agent: agent, History: st, ManagedWorkspace: ManagedCargo(),
			Exports: st, Skills: st, Fetch: FetchPublic, MaxUploadBytes: 1 << 20, Now: clock.Now},
		core: sandboxes.Config{GCInterval: time.Hour, Profiles: bayProfiles},
		mcfg: sandboxes.ManagerConfig{Clock: clock.Now},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	mgr, engine := sandboxestest.NewManagerIn(t, st, cfg.core, cfg.mcfg)
	cfg.svc.Sandboxes = lifecycleOnly{mgr}
	if cfg.whole {
		cfg.svc.Sandboxes = mgr
	}
	cfg.Service = service.New(cfg.svc)
	h := New(cfg.Config)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testAPI{srv: srv, h: h, mgr: mgr, engine: engine, agent: agent, clock: clock, store: st}
}

// call sends a raw request and returns status and decoded JSON body.
func (a *testAPI) call(t *testing.T, method, path, key string, body any, hdr ...string) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, a.srv.URL+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			out = map[string]any{"_raw": string(raw)}
		}
	}
	return resp.StatusCode, out, resp.Header
}

func (a *testAPI) create(t *testing.T, key string, body any) string {
	t.Helper()
	st, out, _ := a.call(t, "POST", "/v1/sandboxes", key, body)
	if st != 201 {
		t.Fatalf("create: %d %v", st, out)
	}
	return out["id"].(string)
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestAstrBotSequence replays what AstrBot's shipyard_neo booter and tools send, through the Go client.
func TestAstrBotSequence(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	c := client.New(a.srv.URL, keyAlice)

	if st, v, err := c.Health(ctx); err != nil || st != "ok" || v != "test" {
		t.Fatalf("health: %q %q %v", st, v, err)
	}
	anon := client.New(a.srv.URL, "")
	profiles, err := anon.Profiles(ctx)
	if err != nil || len(profiles) != 2 || profiles[1].ID != "python-default" || profiles[1].IdleTimeout != 1800 {
		t.Fatalf("profiles without auth (the Manager's, by id): %+v %v", profiles, err)
	}

	// The raw create answer carries exactly Bay's SandboxResponse fields, plus sandgate's additive last_error. The
	// engine holds the start, so the sandbox reads starting until it is released.
	release := a.engine.BlockStarts(t)
	st, raw, _ := a.call(t, "POST", "/v1/sandboxes", keyAlice, map[string]any{"profile": "python-default", "ttl": 3600})
	if st != 201 {
		t.Fatalf("create: %d %v", st, raw)
	}
	want := []string{"id", "status", "profile", "cargo_id", "capabilities", "created_at", "expires_at", "idle_expires_at", "containers",
		"last_error"}
	if len(raw) != len(want) {
		t.Errorf("SandboxResponse has %d fields, want %d: %v", len(raw), len(want), raw)
	}
	for _, k := range want {
		if _, ok := raw[k]; !ok {
			t.Errorf("SandboxResponse lacks %q", k)
		}
	}
	id := raw["id"].(string)
	if !strings.HasPrefix(id, "sandbox-") || raw["expires_at"] == nil {
		t.Errorf("create answer: %v", raw)
	}

	// Bay's readiness polling is reads alone: a read of a starting sandbox (idle to Bay's clients, as Bay answers a
	// create) answers at once, never waiting on the start as a call into the sandbox does, and the sandbox becomes
	// ready by itself once the engine starts it.
	if sb, err := c.GetSandbox(ctx, id); err != nil || sb.Status != "idle" || raw["status"] != "idle" || a.engine.Running() != 0 {
		t.Fatalf("while the start is held: %+v %v (create answered %v), %d containers running", sb, err, raw["status"], a.engine.Running())
	}
	release()
	sb, err := c.WaitReady(ctx, id, time.Millisecond)
	if err != nil || sb.Status != "ready" || len(sb.Containers) != 1 || a.engine.Running() != 1 {
		t.Fatalf("wait ready: %+v %v, %d containers running", sb, err, a.engine.Running())
	}
	if a.agent.execs() != 0 {
		t.Errorf("readiness needed %d calls into the sandbox; it must become ready by itself", a.agent.execs())
	}

	if res, err := c.Shell(ctx, id, "echo mkdir -p skills", 30); err != nil || !res.Success || res.ExitCode != 0 ||
		!strings.HasPrefix(res.ExecutionID, "exec-") || res.Error != nil {
		t.Fatalf("shell: %+v %v", res, err)
	}
	n, err := c.Upload(ctx, id, "skills/skills.zip", strings.NewReader("PK\x03\x04zip"))
	if err != nil || n != 7 || string(a.agent.files["skills/skills.zip"]) != "PK\x03\x04zip" {
		t.Fatalf("upload: %d %v", n, err)
	}
	res, err := c.Shell(ctx, id, "nonexistent-cmd", 30)
	if err != nil || res.Success || res.ExitCode != 127 || res.Error == nil || !strings.Contains(*res.Error, "not found") {
		t.Fatalf("failing shell: %+v %v", res, err)
	}
	for i := 1; i <= 2; i++ {
		py, err := c.Python(ctx, id, "print('hi'); 42", 30)
		if err != nil || !py.Success || py.Data.ExecutionCount != i || py.Output != "hi\n42" ||
			len(py.Data.Output.Images) != 1 || py.Data.Output.Images[0]["image/png"] == "" || py.Code != nil {
			t.Fatalf("python #%d: %+v %v", i, py, err)
		}
	}
	if py, err := c.Python(ctx, id, "raise ValueError()", 30); err != nil || py.Success || py.Error == nil {
		t.Fatalf("python error: %+v %v", py, err)
	}
	if err := c.WriteFile(ctx, id, "notes/a.txt", "hello"); err != nil {
		t.Fatal(err)
	}
	if s, err := c.ReadFile(ctx, id, "notes/a.txt"); err != nil || s != "hello" {
		t.Fatalf("read: %q %v", s, err)
	}
	entries, err := c.ListDir(ctx, id, "notes")
	if err != nil || len(entries) != 1 || entries[0].Name != "a.txt" || !entries[0].IsFile {
		t.Fatalf("list: %+v %v", entries, err)
	}
	resp, err := c.Download(ctx, id, "notes/a.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename=a.txt` {
		t.Errorf("download: %q %v", body, resp.Header)
	}
	resp, err = c.Download(ctx, id, "notes/a.txt", "bytes=1-3")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || string(body) != "ell" || resp.Header.Get("Content-Range") != "bytes 1-3/5" {
		t.Errorf("range download: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if err := c.DeleteFile(ctx, id, "notes/a.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadFile(ctx, id, "notes/a.txt"); apiCode(err) != "file_not_found" {
		t.Errorf("read after delete: %v", err)
	}
	hist, total, err := c.History(ctx, id, nil)
	if err != nil || total != 5 || hist[0].ExecType != "python" || hist[0].Success {
		t.Fatalf("history: %d %+v %v", total, hist, err)
	}
	if _, total, _ := c.History(ctx, id, url.Values{"exec_type": {"shell"}, "success_only": {"true"}}); total != 1 {
		t.Errorf("filtered history total %d, want 1", total)
	}
	if err := c.DeleteSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSandbox(ctx, id); err != nil {
		t.Errorf("second delete must be 204 too: %v", err)
	}
	if _, err := c.GetSandbox(ctx, id); apiCode(err) != "not_found" {
		t.Errorf("get after delete: %v", err)
	}
}

func apiCode(err error) string {
	if e, ok := err.(*client.Error); ok {
		return e.Code
	}
	return ""
}

func TestIdleSandboxStartsWithinTheCall(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"ttl": 3600})
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/stop", keyAlice, nil); st != 200 || out["status"] != "stopped" {
		t.Fatalf("stop: %d %v", st, out)
	}
	if st, out, _ := a.call(t, "GET", "/v1/sandboxes/"+id, keyAlice, nil); out["status"] != "idle" || out["containers"] != nil || a.engine.Running() != 0 {
		t.Fatalf("after stop: %d %v, %d containers running", st, out, a.engine.Running())
	}
	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/shell/exec", keyAlice, map[string]any{"command": "true"})
	if st != 200 || out["success"] != true || a.engine.Running() != 1 || a.agent.execs() != 1 {
		t.Fatalf("exec on idle: %d %v, %d containers running, %d execs", st, out, a.engine.Running(), a.agent.execs())
	}
	if _, out, _ := a.call(t, "GET", "/v1/sandboxes/"+id, keyAlice, nil); out["status"] != "ready" {
		t.Errorf("after exec: %v", out)
	}
}

func TestBayErrors(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"profile": "python-default", "ttl": 3600})
	forever := a.create(t, keyAlice, map[string]any{"ttl": 0})
	S := "/v1/sandboxes/" + id
	tests := []struct {
		name, method, path, key string
		body                    any
		status                  int
		code                    string
	}{
		{"no key", "GET", "/v1/sandboxes", "", nil, 401, "unauthorized"},
		{"bad key", "GET", "/v1/sandboxes", "sk-bay-wrong", nil, 401, "unauthorized"},
		{"other owner's sandbox", "GET", S, keyBob, nil, 404, "not_found"},
		{"other owner's exec", "POST", S + "/shell/exec", keyBob, map[string]any{"command": "true"}, 404, "not_found"},
		{"unknown sandbox", "GET", "/v1/sandboxes/sandbox-000000000000", keyAlice, nil, 404, "not_found"},
		{"unknown profile", "POST", "/v1/sandboxes", keyAlice, map[string]any{"profile": "nope"}, 400, "validation_error"},
		{"absolute path", "GET", S + "/filesystem/files?path=/etc/passwd", keyAlice, nil, 400, "invalid_path"},
		{"workspace absolute", "GET", S + "/filesystem/files?path=/workspace/a", keyAlice, nil, 400, "invalid_path"},
		{"escaping path", "GET", S + "/filesystem/files?path=a/../../x", keyAlice, nil, 400, "invalid_path"},
		{"empty path", "PUT", S + "/filesystem/files", keyAlice, map[string]any{"path": "", "content": "x"}, 400, "invalid_path"},
		{"escaping cwd", "POST", S + "/shell/exec", keyAlice, map[string]any{"command": "true", "cwd": "../"}, 400, "invalid_path"},
		{"absolute cwd", "POST", S + "/shell/exec", keyAlice, map[string]any{"command": "true", "cwd": "/tmp"}, 400, "invalid_path"},
		{"missing file", "GET", S + "/filesystem/files?path=nope.txt", keyAlice, nil, 404, "file_not_found"},
		{"missing download", "GET", S + "/filesystem/download?path=nope.txt", keyAlice, nil, 404, "file_not_found"},
		{"no browser capability", "POST", S + "/browser/exec", keyAlice, map[string]any{"cmd": "get title"}, 400, "capability_not_supported"},
		{"infinite ttl", "POST", "/v1/sandboxes/" + forever + "/extend_ttl", keyAlice, map[string]any{"extend_by": 60}, 409, "sandbox_ttl_infinite"},
		{"unknown route", "GET", "/v1/nothing", keyAlice, nil, 404, "not_found"},
		{"wrong method", "PATCH", S, keyAlice, nil, 405, "method_not_allowed"},
		{"unknown cargo", "POST", "/v1/sandboxes", keyAlice, map[string]any{"cargo_id": "ws-000000000000"}, 404, "not_found"},
		{"no streamer", "GET", S + "/processes", keyAlice, nil, 400, "capability_not_supported"},
		{"skill from an unknown execution", "POST", "/v1/skills/candidates", keyAlice,
			map[string]any{"skill_key": "k", "source_execution_ids": []string{"exec-000000000000"}}, 400, "validation_error"},
		{"skill payload not a blob", "GET", "/v1/skills/payloads/s3%3A%2F%2Fx", keyAlice, nil, 400, "validation_error"},
		{"unknown skill release", "POST", "/v1/skills/releases/sr-000000000000/rollback", keyAlice, nil, 404, "not_found"},
		{"admin gc by a tenant", "POST", "/v1/admin/gc/run", keyAlice, nil, 403, "forbidden"},
		{"admin gc status by a tenant", "GET", "/v1/admin/gc/status", keyAlice, nil, 403, "forbidden"},
		{"skills need auth", "GET", "/v1/skills/releases", "", nil, 401, "unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, out, hdr := a.call(t, tc.method, tc.path, tc.key, tc.body, "X-Request-Id", "rid-"+tc.name)
			if st != tc.status || errCode(out) != tc.code {
				t.Fatalf("got %d %v, want %d %s", st, out, tc.status, tc.code)
			}
			e := out["error"].(map[string]any)
			if e["request_id"] != "rid-"+tc.name || hdr.Get("X-Request-Id") != "rid-"+tc.name {
				t.Errorf("request id not echoed: %v %v", e["request_id"], hdr.Get("X-Request-Id"))
			}
			if _, ok := e["details"].(map[string]any); !ok {
				t.Errorf("details must be an object: %v", e)
			}
			if _, ok := e["message"].(string); !ok {
				t.Errorf("message missing: %v", e)
			}
		})
	}
	_, out, _ := a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "get title"})
	d := out["error"].(map[string]any)["details"].(map[string]any)
	if d["capability"] != "browser" || len(d["available"].([]any)) != 3 {
		t.Errorf("capability details: %v", d)
	}
}

func TestFastAPIValidation(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, nil)
	S := "/v1/sandboxes/" + id
	tests := []struct {
		name, method, path string
		body               any
		typ                string
		loc                []any
	}{
		{"missing command", "POST", S + "/shell/exec", map[string]any{"timeout": 5}, "missing", []any{"body", "command"}},
		{"timeout too big", "POST", S + "/shell/exec", map[string]any{"command": "true", "timeout": 301}, "less_than_equal", []any{"body", "timeout"}},
		{"timeout zero", "POST", S + "/python/exec", map[string]any{"code": "1", "timeout": 0}, "greater_than_equal", []any{"body", "timeout"}},
		{"code not string", "POST", S + "/python/exec", map[string]any{"code": 5}, "string_type", []any{"body", "code"}},
		{"no body", "POST", S + "/python/exec", nil, "missing", []any{"body"}},
		{"bad json", "POST", S + "/shell/exec", "{nope", "json_invalid", []any{"body", float64(0)}},
		{"limit too big", "GET", "/v1/sandboxes?limit=201", nil, "less_than_equal", []any{"query", "limit"}},
		{"limit not int", "GET", "/v1/sandboxes?limit=x", nil, "int_parsing", []any{"query", "limit"}},
		{"missing path", "GET", S + "/filesystem/files", nil, "missing", []any{"query", "path"}},
		{"extend_by zero", "POST", S + "/extend_ttl", map[string]any{"extend_by": 0}, "greater_than", []any{"body", "extend_by"}},
		{"extend_by missing", "POST", S + "/extend_ttl", map[string]any{}, "missing", []any{"body", "extend_by"}},
		{"empty batch", "POST", S + "/browser/exec_batch", map[string]any{"commands": []string{}}, "too_short", []any{"body", "commands"}},
		{"negative ttl", "POST", "/v1/sandboxes", map[string]any{"ttl": -1}, "greater_than_equal", []any{"body", "ttl"}},
		{"cargo too big", "POST", "/v1/cargos", map[string]any{"size_limit_mb": 70000}, "less_than_equal", []any{"body", "size_limit_mb"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, out, _ := a.call(t, tc.method, tc.path, keyAlice, tc.body)
			if st != 422 {
				t.Fatalf("status %d, want 422: %v", st, out)
			}
			detail, ok := out["detail"].([]any)
			if !ok || len(detail) == 0 {
				t.Fatalf("no detail list: %v", out)
			}
			first := detail[0].(map[string]any)
			gotLoc, _ := json.Marshal(first["loc"])
			wantLoc, _ := json.Marshal(tc.loc)
			if first["type"] != tc.typ || string(gotLoc) != string(wantLoc) || first["msg"] == "" {
				t.Errorf("detail[0] = %v, want type %s loc %s", first, tc.typ, wantLoc)
			}
		})
	}
}

func TestShellTimeoutAndCwd(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, nil)
	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/shell/exec", keyAlice, map[string]any{"command": "sleep 999", "timeout": 1, "include_code": true})
	if st != 200 || out["success"] != false || out["exit_code"] != float64(-1) || !strings.Contains(out["error"].(string), "timed out") || out["command"] != "sleep 999" {
		t.Fatalf("timeout result: %d %v", st, out)
	}
	a.call(t, "POST", "/v1/sandboxes/"+id+"/shell/exec", keyAlice, map[string]any{"command": "true", "cwd": "skills/./x/"})
	if a.agent.lastExec.Cwd != "skills/x" || a.agent.lastExec.Timeout != 30*time.Second {
		t.Errorf("exec request: %+v", a.agent.lastExec)
	}
}

// TestSessionNotReadyAndExpired: a call into a sandbox being rebuilt after its container died answers Bay's 503
// session_not_ready with the sandbox and when to retry; past its TTL it is expired.
func TestSessionNotReadyAndExpired(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"ttl": 60})
	sandboxestest.WaitStatus(t, a.mgr, id, sandboxes.StatusReady)
	release := a.engine.BlockStarts(t) // the rebuild stays under way
	if !a.engine.Die(id, false) {
		t.Fatal("no running container to kill")
	}
	// Die returns once the engine's event is read; the sandbox reads idle once its death is recorded, and the next
	// call rebuilds it.
	sandboxestest.WaitStatus(t, a.mgr, id, sandboxes.StatusIdle)
	for i := range 2 { // the call that begins the rebuild, and one during it
		st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/python/exec", keyAlice, map[string]any{"code": "1"})
		e, _ := out["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		if st != 503 || errCode(out) != "session_not_ready" || d["sandbox_id"] != id || d["retry_after_ms"] == nil {
			t.Fatalf("not ready, call %d: %d %v", i+1, st, out)
		}
	}
	if a.agent.execs() != 0 {
		t.Errorf("%d calls reached the agent of a sandbox being rebuilt", a.agent.execs())
	}
	release()
	sandboxestest.WaitStatus(t, a.mgr, id, sandboxes.StatusReady)
	a.clock.Advance(2 * time.Minute)
	if _, out, _ := a.call(t, "GET", "/v1/sandboxes/"+id, keyAlice, nil); out["status"] != "expired" {
		t.Fatalf("status after ttl: %v", out)
	}
	for _, path := range []string{"/shell/exec", "/extend_ttl"} {
		st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+path, keyAlice, map[string]any{"command": "true", "extend_by": 10})
		if st != 409 || errCode(out) != "sandbox_expired" {
			t.Errorf("%s on expired: %d %v", path, st, out)
		}
	}
}

// TestStartupFailure: a sandbox whose start-up failed answers calls with ship_error 502 and the runtime's message
// in details.last_error, and shows status failed with last_error; a sandbox that started has last_error null. The
// failure is the agent's: stopped, the sandbox is started again within the call, and its agent's /health says its
// start-up customisation failed.
func TestStartupFailure(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"ttl": 600})
	sandboxestest.WaitStatus(t, a.mgr, id, sandboxes.StatusReady)
	if _, out, _ := a.call(t, "GET", "/v1/sandboxes/"+id, keyAlice, nil); out["last_error"] != nil || !hasKey(out, "last_error") {
		t.Errorf("a healthy sandbox's last_error: %v", out)
	}
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/stop", keyAlice, nil); st != 200 {
		t.Fatalf("stop: %d %v", st, out)
	}
	a.engine.FailStartups("ERROR: No matching distribution found for nope==1")
	for _, path := range []string{"/shell/exec", "/python/exec"} {
		st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+path, keyAlice, map[string]any{"command": "true", "code": "1"})
		e, _ := out["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		msg, _ := d["last_error"].(string)
		if st != 502 || errCode(out) != "ship_error" || !strings.Contains(msg, "No matching distribution found for nope==1") {
			t.Errorf("%s on a sandbox whose start-up failed: %d %v", path, st, out)
		}
	}
	_, out, _ := a.call(t, "GET", "/v1/sandboxes/"+id, keyAlice, nil)
	if msg, _ := out["last_error"].(string); out["status"] != "failed" || !strings.Contains(msg, "No matching distribution found for nope==1") {
		t.Errorf("failed sandbox: %v", out)
	}
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func TestExtendTTLAndIdempotency(t *testing.T) {
	a := newTestAPI(t)
	body := map[string]any{"profile": "python-default", "ttl": 600}
	_, first, _ := a.call(t, "POST", "/v1/sandboxes", keyAlice, body, "Idempotency-Key", "k1")
	st, again, hdr := a.call(t, "POST", "/v1/sandboxes", keyAlice, body, "Idempotency-Key", "k1")
	if st != 201 || again["id"] != first["id"] || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v vs %v", st, again, first)
	}
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes", keyAlice, map[string]any{"ttl": 601}, "Idempotency-Key", "k1"); st != 409 || errCode(out) != "conflict" {
		t.Errorf("same key, other body: %d %v", st, out)
	}
	if _, other, _ := a.call(t, "POST", "/v1/sandboxes", keyBob, body, "Idempotency-Key", "k1"); other["id"] == first["id"] {
		t.Errorf("keys must be scoped per owner")
	}
	id := first["id"].(string)
	old, _ := time.Parse(time.RFC3339, first["expires_at"].(string))
	_, ext, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/extend_ttl", keyAlice, map[string]any{"extend_by": 60}, "Idempotency-Key", "e1")
	_, ext2, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/extend_ttl", keyAlice, map[string]any{"extend_by": 60}, "Idempotency-Key", "e1")
	got, _ := time.Parse(time.RFC3339, ext["expires_at"].(string))
	if got.Sub(old) != time.Minute || ext2["expires_at"] != ext["expires_at"] {
		t.Errorf("extend: %v -> %v (replay %v)", old, got, ext2["expires_at"])
	}
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/keepalive", keyAlice, nil); st != 200 || out["status"] != "ok" {
		t.Errorf("keepalive: %d %v", st, out)
	}
}

func TestListScopingAndPaging(t *testing.T) {
	a := newTestAPI(t)
	for range 3 {
		a.create(t, keyAlice, nil)
	}
	bobs := a.create(t, keyBob, nil)
	_, out, _ := a.call(t, "GET", "/v1/sandboxes?limit=2", keyAlice, nil)
	items := out["items"].([]any)
	if len(items) != 2 || out["next_cursor"] == nil {
		t.Fatalf("page 1: %v", out)
	}
	_, out2, _ := a.call(t, "GET", "/v1/sandboxes?limit=2&cursor="+out["next_cursor"].(string), keyAlice, nil)
	if len(out2["items"].([]any)) != 1 || out2["next_cursor"] != nil {
		t.Fatalf("page 2: %v", out2)
	}
	for _, it := range append(items, out2["items"].([]any)...) {
		if it.(map[string]any)["id"] == bobs {
			t.Errorf("alice sees bob's sandbox")
		}
	}
	if _, all, _ := a.call(t, "GET", "/v1/sandboxes", keyAdmin, nil); len(all["items"].([]any)) != 4 {
		t.Errorf("admin sees %d sandboxes, want 4", len(all["items"].([]any)))
	}
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes/"+bobs, keyAdmin, nil); st != 200 {
		t.Errorf("admin get of bob's sandbox: %d", st)
	}
}

func TestAnonymous(t *testing.T) {
	a := newTestAPI(t, func(c *testConfig) { c.AllowAnonymous = true })
	st, out, _ := a.call(t, "POST", "/v1/sandboxes", "", map[string]any{}, "X-Owner", "carol")
	if st != 201 {
		t.Fatalf("anonymous create: %d %v", st, out)
	}
	id := out["id"].(string)
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes/"+id, "", nil, "X-Owner", "dave"); st != 404 {
		t.Errorf("another anonymous owner sees it: %d", st)
	}
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes/"+id, "", nil, "X-Owner", "carol"); st != 200 {
		t.Errorf("owner cannot see it: %d", st)
	}
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes", "sk-bay-wrong", nil); st != 401 {
		t.Errorf("a wrong key must still be refused in anonymous mode: %d", st)
	}
}

func multipartBody(t *testing.T, fileFirst bool, path string, content []byte) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	writePath := func() { _ = mw.WriteField("path", path) }
	if !fileFirst {
		writePath()
	}
	fw, _ := mw.CreateFormFile("file", "upload")
	fw.Write(content)
	if fileFirst {
		writePath()
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func TestUpload(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, nil)
	u := a.srv.URL + "/v1/sandboxes/" + id + "/filesystem/upload"
	send := func(body io.Reader, ct string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", u, body)
		req.Header.Set("Authorization", "Bearer "+keyAlice)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, fileFirst := range []bool{false, true} {
		body, ct := multipartBody(t, fileFirst, "data/x.bin", []byte("abcdef"))
		st, out := send(body, ct)
		if st != 200 || out["status"] != "ok" || out["path"] != "data/x.bin" || out["size"] != float64(6) {
			t.Errorf("fileFirst=%v: %d %v", fileFirst, st, out)
		}
	}
	body, ct := multipartBody(t, false, "big.bin", bytes.Repeat([]byte("x"), 2<<20))
	if st, out := send(body, ct); st != 413 || errCode(out) != "payload_too_large" {
		t.Errorf("oversized: %d %v", st, out)
	}
	// Under the Content-Length pre-check but over the cap: stopped while streaming, nothing kept.
	body, ct = multipartBody(t, false, "mid.bin", bytes.Repeat([]byte("x"), 1<<20+512<<10))
	if st, out := send(body, ct); st != 413 || errCode(out) != "payload_too_large" {
		t.Errorf("oversized while streaming: %d %v", st, out)
	}
	if _, ok := a.agent.files["mid.bin"]; ok {
		t.Errorf("a partial upload was kept")
	}
	body, ct = multipartBody(t, false, "../x", []byte("a"))
	if st, out := send(body, ct); st != 400 || errCode(out) != "invalid_path" {
		t.Errorf("escaping upload: %d %v", st, out)
	}
	var onlyPath bytes.Buffer
	mw := multipart.NewWriter(&onlyPath)
	mw.WriteField("path", "a")
	mw.Close()
	if st, out := send(&onlyPath, mw.FormDataContentType()); st != 422 {
		t.Errorf("missing file: %d %v", st, out)
	}
}

func TestBrowser(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"profile": "browser-python"})
	S := "/v1/sandboxes/" + id
	_, out, _ := a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "open example.com"})
	if out["success"] != true || out["output"] != "https://example.com\n" || out["exit_code"] != float64(0) {
		t.Errorf("open: %v", out)
	}
	_, out, _ = a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "click #btn"})
	if out["success"] != false || out["exit_code"] != float64(127) || !strings.Contains(out["error"].(string), "supported browser commands") {
		t.Errorf("unsupported: %v", out)
	}
	_, out, _ = a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "screenshot shots/a.png"})
	if out["success"] != true || string(a.agent.files["shots/a.png"]) != "\x89PNG" {
		t.Errorf("screenshot: %v", out)
	}
	_, out, _ = a.call(t, "POST", S+"/browser/exec_batch", keyAlice, map[string]any{"commands": []string{"get title", "hover x", "get url"}})
	res := out["results"].([]any)
	if out["success"] != false || out["total_steps"] != float64(3) || out["completed_steps"] != float64(2) || len(res) != 2 ||
		res[0].(map[string]any)["stdout"] != "Example Domain\n" {
		t.Errorf("batch stop_on_error: %v", out)
	}
	_, out, _ = a.call(t, "POST", S+"/browser/exec_batch", keyAlice, map[string]any{"commands": []string{"hover x", "eval 1+1"}, "stop_on_error": false})
	if out["completed_steps"] != float64(2) {
		t.Errorf("batch continue: %v", out)
	}
}

func TestHistoryPatch(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, nil)
	S := "/v1/sandboxes/" + id
	if st, out, _ := a.call(t, "GET", S+"/history/last", keyAlice, nil); st != 404 {
		t.Errorf("last of empty history: %d %v", st, out)
	}
	_, ex, _ := a.call(t, "POST", S+"/shell/exec", keyAlice, map[string]any{"command": "echo a", "tags": "x,y", "description": "first"})
	a.call(t, "POST", S+"/python/exec", keyAlice, map[string]any{"code": "1"})
	eid := ex["execution_id"].(string)
	st, out, _ := a.call(t, "PATCH", S+"/history/"+eid, keyAlice, map[string]any{"notes": "worked"})
	if st != 200 || out["notes"] != "worked" || out["description"] != "first" || out["tags"] != "x,y" {
		t.Fatalf("patch: %d %v", st, out)
	}
	if _, out, _ := a.call(t, "GET", S+"/history/"+eid, keyAlice, nil); out["notes"] != "worked" || out["exec_type"] != "shell" {
		t.Errorf("get: %v", out)
	}
	if _, out, _ := a.call(t, "GET", S+"/history/last", keyAlice, nil); out["exec_type"] != "python" {
		t.Errorf("last: %v", out)
	}
	for q, want := range map[string]float64{"has_notes=true": 1, "tags=y": 1, "has_description=true": 1, "exec_type=python": 1, "limit=1": 2} {
		_, out, _ := a.call(t, "GET", S+"/history?"+q, keyAlice, nil)
		if out["total"] != want {
			t.Errorf("history?%s total %v, want %v", q, out["total"], want)
		}
	}
	if st, _, _ := a.call(t, "GET", S+"/history/exec-000000000000", keyAlice, nil); st != 404 {
		t.Errorf("unknown entry: %d", st)
	}
	if st, _, _ := a.call(t, "GET", S+"/history", keyBob, nil); st != 404 {
		t.Errorf("bob reads alice's history: %d", st)
	}
}

func TestCargos(t *testing.T) {
	a := newTestAPI(t)
	st, c, _ := a.call(t, "POST", "/v1/cargos", keyAlice, map[string]any{"size_limit_mb": 256}, "Idempotency-Key", "c1")
	if st != 201 || !strings.HasPrefix(c["id"].(string), "ws-") || c["managed"] != false || c["size_limit_mb"] != float64(256) {
		t.Fatalf("create cargo: %d %v", st, c)
	}
	cid := c["id"].(string)
	if _, again, _ := a.call(t, "POST", "/v1/cargos", keyAlice, map[string]any{"size_limit_mb": 256}, "Idempotency-Key", "c1"); again["id"] != cid {
		t.Errorf("idempotent cargo create: %v", again)
	}
	// Whoever names a cargo mounts its workspace: another owner's cargo does not exist for the caller (as in Bay);
	// an admin key may use any (one sandbox at a time mounts a workspace: the admin's is gone before alice's).
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes", keyBob, map[string]any{"cargo_id": cid}); st != 404 || errCode(out) != "not_found" {
		t.Errorf("bob creates on alice's cargo: %d %v", st, out)
	}
	adminSB := a.create(t, keyAdmin, map[string]any{"cargo_id": cid})
	if _, sb, _ := a.call(t, "GET", "/v1/sandboxes/"+adminSB, keyAdmin, nil); sb["cargo_id"] != cid {
		t.Errorf("admin sandbox on alice's cargo: %v", sb)
	}
	a.call(t, "DELETE", "/v1/sandboxes/"+adminSB, keyAdmin, nil)
	sid := a.create(t, keyAlice, map[string]any{"cargo_id": cid})
	if _, sb, _ := a.call(t, "GET", "/v1/sandboxes/"+sid, keyAlice, nil); sb["cargo_id"] != cid {
		t.Errorf("sandbox cargo: %v", sb)
	}
	managedSB := a.create(t, keyAlice, nil)
	if _, list, _ := a.call(t, "GET", "/v1/cargos", keyAlice, nil); len(list["items"].([]any)) != 1 {
		t.Errorf("default list shows external cargos only: %v", list)
	}
	if _, list, _ := a.call(t, "GET", "/v1/cargos?managed=true", keyAlice, nil); len(list["items"].([]any)) != 1 ||
		list["items"].([]any)[0].(map[string]any)["managed_by_sandbox_id"] != managedSB {
		t.Errorf("managed list: %v", list)
	}
	if st, _, _ := a.call(t, "GET", "/v1/cargos/"+cid, keyBob, nil); st != 404 {
		t.Errorf("bob sees alice's cargo: %d", st)
	}
	st, out, _ := a.call(t, "DELETE", "/v1/cargos/"+cid, keyAlice, nil)
	ids, _ := out["error"].(map[string]any)["details"].(map[string]any)["active_sandbox_ids"].([]any)
	if st != 409 || len(ids) != 1 || ids[0] != sid {
		t.Fatalf("delete in use: %d %v", st, out)
	}
	a.call(t, "DELETE", "/v1/sandboxes/"+sid, keyAlice, nil)
	if st, _, _ := a.call(t, "DELETE", "/v1/cargos/"+cid, keyAlice, nil); st != 204 {
		t.Errorf("delete unused cargo: %d", st)
	}
	if st, _, _ := a.call(t, "GET", "/v1/cargos/"+cid, keyAlice, nil); st != 404 {
		t.Errorf("deleted cargo still there: %d", st)
	}
}

// TestTickets mints with the service's real minter and checks what the ticket says by verifying it.
func TestTickets(t *testing.T) {
	secret := []byte(strings.Repeat("s", tickets.MinSecretLength))
	var a *testAPI
	now := func() time.Time { return a.clock.Now() }
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: secret, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	urls, err := tickets.ParseURLs("https://x", "")
	if err != nil {
		t.Fatal(err)
	}
	a = newTestAPI(t, func(c *testConfig) { c.svc.Tickets = service.NewTicketMinter(iss, urls) })
	id := a.create(t, keyAlice, nil)
	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/tickets", keyAlice, map[string]any{"scope": "vnc", "ttl": 30})
	tk, _ := out["ticket"].(string)
	if st != 201 || tk == "" || !strings.HasPrefix(fmt.Sprint(out["url"]), "https://x/sandboxes/"+id+"/vnc/") {
		t.Fatalf("ticket: %d %v", st, out)
	}
	v, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: secret, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(tk, tickets.Expect{SandboxID: id, Kind: tickets.KindVNC, Permission: tickets.PermRead})
	if err != nil {
		t.Fatalf("the ticket does not open %s's vnc: %v", id, err)
	}
	if ttl := c.ExpiresAt.Sub(c.IssuedAt.Time); ttl != 30*time.Second || c.Subject != "default" {
		t.Errorf("ticket claims %+v: lifetime %s, want 30s for owner default", c, ttl)
	}
	if st, _, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/tickets", keyBob, map[string]any{}); st != 404 {
		t.Errorf("bob got a ticket for alice's sandbox: %d", st)
	}
	if st, _, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/tickets", keyAlice, map[string]any{"scope": "root"}); st != 422 {
		t.Errorf("bad scope: %d", st)
	}
}

// TestOpenAPIMatchesRouter checks that every documented operation is routed and every routed operation is
// documented, and that Bay's routes AstrBot uses are all present.
func TestOpenAPIMatchesRouter(t *testing.T) {
	a := newTestAPI(t)
	st, doc, _ := a.call(t, "GET", "/v1/openapi.json", "", nil)
	if st != 200 {
		t.Fatalf("openapi: %d", st)
	}
	paths := doc["paths"].(map[string]any)
	documented := map[string]bool{}
	for p, item := range paths {
		for m := range item.(map[string]any) {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	routed := map[string]bool{}
	for _, rt := range a.h.routes {
		routed[rt.method+" "+strings.ReplaceAll(rt.path, "...}", "}")] = true
		// The mux must really dispatch it.
		req := httptest.NewRequest(rt.method, strings.NewReplacer("{id}", "sandbox-x", "{eid}", "exec-x", "{cid}", "ws-x", "{pid}", "1", "{rest...}", "a/b").Replace(rt.path), nil)
		if _, pattern := a.h.mux.Handler(req); pattern != rt.method+" "+rt.path {
			t.Errorf("%s %s dispatches to %q", rt.method, rt.path, pattern)
		}
	}
	for op := range documented {
		if !routed[op] {
			t.Errorf("documented but not routed: %s", op)
		}
	}
	for op := range routed {
		if !documented[op] {
			t.Errorf("routed but not documented: %s", op)
		}
	}
	bay := []string{
		"GET /health", "GET /v1/profiles", "POST /v1/sandboxes", "GET /v1/sandboxes", "GET /v1/sandboxes/{id}",
		"DELETE /v1/sandboxes/{id}", "POST /v1/sandboxes/{id}/stop", "POST /v1/sandboxes/{id}/keepalive",
		"POST /v1/sandboxes/{id}/extend_ttl", "POST /v1/sandboxes/{id}/python/exec", "POST /v1/sandboxes/{id}/shell/exec",
		"POST /v1/sandboxes/{id}/browser/exec", "POST /v1/sandboxes/{id}/browser/exec_batch",
		"GET /v1/sandboxes/{id}/filesystem/files", "PUT /v1/sandboxes/{id}/filesystem/files",
		"DELETE /v1/sandboxes/{id}/filesystem/files", "GET /v1/sandboxes/{id}/filesystem/directories",
		"POST /v1/sandboxes/{id}/filesystem/upload", "GET /v1/sandboxes/{id}/filesystem/download",
		"GET /v1/sandboxes/{id}/history", "GET /v1/sandboxes/{id}/history/last", "GET /v1/sandboxes/{id}/history/{eid}",
		"PATCH /v1/sandboxes/{id}/history/{eid}", "POST /v1/cargos", "GET /v1/cargos", "GET /v1/cargos/{cid}", "DELETE /v1/cargos/{cid}",
	}
	for _, op := range bay {
		if !routed[op] || !documented[op] {
			t.Errorf("Bay route %s missing (routed %v, documented %v)", op, routed[op], documented[op])
		}
	}
}

func TestCleanWorkspacePath(t *testing.T) {
	tests := []struct {
		in, want  string
		allowRoot bool
		reason    string // "" when the path is accepted
	}{
		{"a.txt", "a.txt", false, ""},
		{"skills/./x//y", "skills/x/y", false, ""},
		{"a/../b", "b", false, ""},
		{".", ".", true, ""},
		{".", "", false, service.PathReasonRoot},
		{"", "", true, service.PathReasonEmpty},
		{"   ", "", true, service.PathReasonEmpty},
		{"/abs", "", true, service.PathReasonAbsolute},
		{"/workspace/a", "", true, service.PathReasonAbsolute},
		{"..", "", true, service.PathReasonTraversal},
		{"a/../../b", "", true, service.PathReasonTraversal},
		{"a\x00b", "", true, service.PathReasonNullByte},
	}
	for _, tc := range tests {
		got, err := service.CleanWorkspacePath("cwd", tc.in, tc.allowRoot)
		if (err == nil) != (tc.reason == "") || got != tc.want {
			t.Errorf("service.CleanWorkspacePath(%q) = %q, %v", tc.in, got, err)
		}
		if err == nil {
			continue
		}
		// Bay's details: {field, reason}.
		e := service.AsError(err)
		if e.Code != service.CodeInvalidPath || e.Details["field"] != "cwd" || e.Details["reason"] != tc.reason || len(e.Details) != 2 {
			t.Errorf("service.CleanWorkspacePath(%q): %s %v", tc.in, e.Code, e.Details)
		}
	}
}

// TestTicketMintFloodIsRateLimitedPerOwner: alice floods the tickets route; past her budget she gets a typed 429 in
// the error envelope with Retry-After, and bob's tickets are still minted and verify.
func TestTicketMintFloodIsRateLimitedPerOwner(t *testing.T) {
	secret := []byte("bayapi-ticket-flood-secret-0123456789abcdef")
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: secret, MintPerMinute: 60, MintBurst: 20})
	if err != nil {
		t.Fatal(err)
	}
	ver, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAPI(t, func(c *testConfig) { c.svc.Tickets = service.NewTicketMinter(iss, tickets.URLs{}) })
	mine := a.create(t, keyAlice, nil)
	bobs := a.create(t, keyBob, nil)
	limited := 0
	for range 100 {
		st, out, hdr := a.call(t, "POST", "/v1/sandboxes/"+mine+"/tickets", keyAlice, map[string]any{"scope": "app"})
		switch st {
		case 201:
		case 429:
			limited++
			if errCode(out) != service.CodeRateLimited || hdr.Get("Retry-After") == "" {
				t.Fatalf("rate-limited answer: %v %v", out, hdr)
			}
		default:
			t.Fatalf("alice's flood: %d %v", st, out)
		}
	}
	if limited < 70 {
		t.Fatalf("only %d of alice's 100 mints were limited", limited)
	}
	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+bobs+"/tickets", keyBob, map[string]any{"scope": "app"})
	if st != 201 {
		t.Fatalf("bob during alice's flood: %d %v", st, out)
	}
	if _, err := ver.Verify(out["ticket"].(string), tickets.Expect{SandboxID: bobs, Kind: tickets.KindApp}); err != nil {
		t.Fatalf("bob's ticket: %v", err)
	}
}
