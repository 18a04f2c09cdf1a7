package fastgpt

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// agentSandbox is a real sandbox container from our image with the IDE agent on, and the password FastGPT would
// read from it with `cat ~/.fastgpt-ide-agent-password`.
type agentSandbox struct {
	*testenv.Sandbox
	password string
}

func runAgentSandbox(t *testing.T) *agentSandbox {
	t.Helper()
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Env: []string{"IDE_AGENT_ENABLED=true"}})
	out, err := exec.Command("docker", "exec", sb.Name, "sh", "-c", "cat ~/.fastgpt-ide-agent-password").Output()
	pw := strings.TrimSpace(string(out))
	if err != nil || len(pw) != 43 {
		t.Fatalf("sandbox has no IDE-agent password (%q, %v)", pw, err)
	}
	return &agentSandbox{Sandbox: sb, password: pw}
}

// fastgptFor is a stand-in FastGPT whose verifyTicket resolves tickets to the sandbox's :1318 and the preview
// session to its :1319.
func fastgptFor(t *testing.T, sb *agentSandbox) *fakeApp {
	app := newFakeApp(t, nil)
	app.data = map[string]any{"sandbox_url": sb.IP + ":1318", "agent_token": sb.password}
	app.verify = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("X-Sandbox-Preview-Session") == testSandboxID+":"+testSessionID {
			jsonRes(w, 200, map[string]any{"sandbox_url": "http://" + sb.IP + ":1319", "agent_token": sb.password})
			return false
		}
		return true
	}
	return app
}

type gatewayClient struct {
	t    *testing.T
	base string // http://127.0.0.1:port
	ctx  context.Context
}

func (g *gatewayClient) dial(channel, perm string) *websocket.Conn {
	g.t.Helper()
	ticket := signTicket(g.t, testSecret, testClaims(channel, perm), time.Now())
	c, resp, err := websocket.Dial(g.ctx, "ws"+strings.TrimPrefix(g.base, "http")+"/"+channel+"?ticket="+ticket, nil)
	if err != nil {
		st := 0
		if resp != nil {
			st = resp.StatusCode
		}
		g.t.Fatalf("dial %s through the gateway: %v (status %d)", channel, err, st)
	}
	c.SetReadLimit(64 << 20)
	g.t.Cleanup(func() { c.CloseNow() })
	return c
}

type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Method string `json:"method"`
	ID     *int   `json:"id"`
}

// rpc sends one JSON-RPC request and returns its answer, skipping fs/did_change notifications.
func rpc(t testing.TB, ctx context.Context, c *websocket.Conn, id int, method string, params any) rpcAnswer {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var a rpcAnswer
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatalf("%s: %v: %s", method, err, data)
		}
		if a.ID != nil && *a.ID == id {
			return a
		}
	}
}

func rpcOK(t testing.TB, ctx context.Context, c *websocket.Conn, id int, method string, params, into any) {
	t.Helper()
	a := rpc(t, ctx, c, id, method, params)
	if a.Error != nil {
		t.Fatalf("%s: error %d %s", method, a.Error.Code, a.Error.Message)
	}
	if into != nil {
		if err := json.Unmarshal(a.Result, into); err != nil {
			t.Fatal(err)
		}
	}
}

// exerciseGateway runs the IDE's traffic through a gateway: /fs JSON-RPC with write and read tickets, a terminal
// session, and a ranged preview.
func exerciseGateway(t *testing.T, wsBase, previewBase string) {
	dir := testenv.Unique("e2e")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := &gatewayClient{t: t, base: wsBase, ctx: ctx}

	t.Run("fs", func(t *testing.T) {
		c := g.dial("fs", "write")
		var w struct {
			Etag string `json:"etag"`
		}
		rpcOK(t, ctx, c, 1, "fs/write_file", map[string]any{"path": dir + "/hello.txt", "content": base64.StdEncoding.EncodeToString([]byte("0123456789"))}, &w)
		var rf struct {
			Content, Etag string
		}
		rpcOK(t, ctx, c, 2, "fs/read_file", map[string]any{"path": "/" + dir + "/hello.txt"}, &rf)
		if got, _ := base64.StdEncoding.DecodeString(rf.Content); string(got) != "0123456789" || rf.Etag != w.Etag {
			t.Fatalf("read_file %+v", rf)
		}
		var entries []struct {
			Name  string `json:"name"`
			IsDir bool   `json:"is_dir"`
			Size  int64  `json:"size"`
		}
		rpcOK(t, ctx, c, 3, "fs/read_dir", map[string]any{"path": dir}, &entries)
		if len(entries) != 1 || entries[0].Name != "hello.txt" || entries[0].Size != 10 {
			t.Fatalf("read_dir %+v", entries)
		}
		var ex struct {
			ExitCode int    `json:"exitCode"`
			Stdout   string `json:"stdout"`
		}
		rpcOK(t, ctx, c, 4, "fs/exec", map[string]any{"command": "cat " + dir + "/hello.txt; id -u"}, &ex)
		if ex.ExitCode != 0 || ex.Stdout != "0123456789"+"65532\n" {
			t.Fatalf("exec %+v", ex)
		}
		if a := rpc(t, ctx, c, 5, "fs/write_file", map[string]any{"path": dir + "/hello.txt", "content": "eA=="}); a.Error == nil || a.Error.Code != -32001 {
			t.Fatalf("overwrite without etag: %+v", a)
		}
		r := g.dial("fs", "read")
		if a := rpc(t, ctx, r, 1, "fs/mkdir", map[string]any{"path": "nope"}); a.Error == nil || a.Error.Code != -32003 ||
			a.Error.Message != "Forbidden: read-only sandbox ticket" {
			t.Fatalf("read-only mkdir: %+v", a)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		c := g.dial("terminal", "write")
		if err := c.Write(ctx, websocket.MessageBinary, []byte("echo e2e-$((6*7))\n")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for !strings.Contains(out.String(), "e2e-42") {
			_, data, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("terminal output %q: %v", out.String(), err)
			}
			out.Write(data)
		}
	})

	t.Run("preview", func(t *testing.T) {
		url := previewBase + "/preview/" + testSandboxID + "/" + testSessionID + "/" + dir + "/hello.txt"
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Range", "bytes=2-5")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusPartialContent || string(body) != "2345" || resp.Header.Get("Content-Range") != "bytes 2-5/10" ||
			resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") != "private, no-store" {
			t.Fatalf("preview range: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		req, _ = http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Length") != "10" {
			t.Fatalf("preview HEAD: %d %v", resp.StatusCode, resp.Header)
		}
	})
}

// TestEndToEndGateway: a real sandbox container with our agent behind the real gateway binary configured with the
// fastgpt_proxy directive; FastGPT is the stand-in.
func TestEndToEndGateway(t *testing.T) {
	testenv.Integration(t)
	sb := runAgentSandbox(t)
	app := fastgptFor(t, sb)
	port := testenv.FreePort(t)
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
}
http://127.0.0.1:%d {
	fastgpt_proxy {
		app_url {env.FG_TEST_APP_URL}
		request_timeout 5s
	}
}
`, port)
	gw := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{Env: []string{
		"AGENT_SANDBOX_PROXY_SECRET=" + testSecret, "FG_TEST_APP_URL=" + app.srv.URL}})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	exerciseGateway(t, base, base)

	t.Run("reload closes relays with 1001", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := (&gatewayClient{t: t, base: base, ctx: ctx}).dial("fs", "read")
		rpcOK(t, ctx, c, 1, "fs/read_dir", map[string]any{"path": "."}, nil)
		errc := make(chan error, 1)
		go func() {
			for {
				if _, _, err := c.Read(ctx); err != nil {
					errc <- err
					return
				}
			}
		}()
		// A changed config (an unchanged one is not reloaded): the old handler's Cleanup ends its relays.
		if err := gw.Reload(strings.Replace(caddyfile, "request_timeout 5s", "request_timeout 6s", 1)); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Fatalf("after reload: %v", err)
		}
		// The new config serves at once.
		c2 := (&gatewayClient{t: t, base: base, ctx: ctx}).dial("fs", "read")
		rpcOK(t, ctx, c2, 1, "fs/read_dir", map[string]any{"path": "."}, nil)
	})
	for _, s := range []string{sb.password, testSecret, "eyJ"} { // agent token, proxy secret, any JWT
		if strings.Contains(gw.Logs(), s) {
			t.Fatal("a secret appears in the gateway log")
		}
	}
}

// TestEndToEndDeployCaddyfile runs deploy/fastgpt/Caddyfile with only the original's environment: one port, then
// PORT and PREVIEW_PORT split.
func TestEndToEndDeployCaddyfile(t *testing.T) {
	testenv.Integration(t)
	deploy, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "fastgpt", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	sb := runAgentSandbox(t)
	app := fastgptFor(t, sb)
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	t.Run("one port", func(t *testing.T) {
		port := testenv.FreePort(t)
		testenv.StartGateway(t, string(deploy), testenv.GatewayOptions{Env: []string{
			fmt.Sprintf("PORT=%d", port), "AGENT_SANDBOX_PROXY_SECRET=" + testSecret, "FASTGPT_APP_URL=" + app.srv.URL}})
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		if st, body := get(base + "/health"); st != 200 || body != "OK" {
			t.Fatalf("health %d %q", st, body)
		}
		if st, body := get(base + "/elsewhere"); st != 404 || body != "" {
			t.Fatalf("unknown path %d %q", st, body)
		}
		resp, err := http.Get(base + "/fs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("Server") != "" {
			t.Fatalf("fs without ticket: %d, Server %q", resp.StatusCode, resp.Header.Get("Server"))
		}
		exerciseGateway(t, base, base)
	})
	t.Run("split ports", func(t *testing.T) {
		port, previewPort := testenv.FreePort(t), testenv.FreePort(t)
		testenv.StartGateway(t, string(deploy), testenv.GatewayOptions{Env: []string{
			fmt.Sprintf("PORT=%d", port), fmt.Sprintf("PREVIEW_PORT=%d", previewPort),
			"AGENT_SANDBOX_PROXY_SECRET=" + testSecret, "FASTGPT_APP_URL=" + app.srv.URL}})
		ws, pv := fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", previewPort)
		for _, u := range []string{ws + "/health", pv + "/health"} {
			if st, body := get(u); st != 200 || body != "OK" {
				t.Fatalf("%s: %d %q", u, st, body)
			}
		}
		if st, _ := get(pv + "/fs"); st != 404 {
			t.Fatalf("fs on the preview port: %d", st)
		}
		if st, _ := get(ws + "/preview/" + testSandboxID + "/" + testSessionID + "/e2e/hello.txt"); st != 404 {
			t.Fatalf("preview on the ws port: %d", st)
		}
		exerciseGateway(t, ws, pv)
	})
}
