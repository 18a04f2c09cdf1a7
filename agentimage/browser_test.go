package main_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestBrowserCDPAndVNC runs one browser sandbox (Xvfb, x11vnc and Chromium supervised by the agent, hardened
// container) and drives it with real clients: Playwright over the agent's /cdp, a raw CDP WebSocket for the
// Browser.close filter, a WebSocket VNC client, and the REST helpers. Under runc and under gVisor (runsc).
func TestBrowserCDPAndVNC(t *testing.T) {
	testenv.Integration(t)
	eachRuntime(t, browserCDPAndVNC)
}

func browserCDPAndVNC(t *testing.T, runtime string) {
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "browser", Capabilities: []string{"browser", "vnc"}, Memory: "2g", Runtime: runtime})
	ctx := context.Background()

	var info agentapi.BrowserInfo
	if e := callJSON(t, sb, http.MethodGet, "/v1/browser/info", nil, nil, &info); e != nil {
		t.Fatalf("browser info: %v", e)
	}
	if info.CDPURL != sb.URL+"/cdp" || !strings.HasPrefix(info.WebSocketURL, "ws://"+strings.TrimPrefix(sb.URL, "http://")+"/cdp/devtools/browser/") || !info.VNC {
		t.Fatalf("info: %+v", info)
	}

	// A page served inside the sandbox: Chromium reaches it on the sandbox's loopback.
	sb.Exec(t, "sh", "-c", "mkdir -p /tmp/site && printf '<html><head><title>Hello Sandgate</title></head><body><h1>Inside the sandbox</h1><p>served by python</p></body></html>' > /tmp/site/index.html")
	dockerExecDetached(t, sb, "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp/site")
	waitProxy(t, sb, "/proxy/8000/")
	const pageURL = "http://127.0.0.1:8000/"

	t.Run("discovery rewritten for the gateway", func(t *testing.T) {
		hdr := http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"gw.example.com"}, "X-Forwarded-Prefix": {"/sandboxes/sb1/cdp"}}
		var version map[string]any
		if e := callJSON(t, sb, http.MethodGet, "/cdp/json/version", hdr, nil, &version); e != nil {
			t.Fatal(e)
		}
		if ws, _ := version["webSocketDebuggerUrl"].(string); !strings.HasPrefix(ws, "wss://gw.example.com/sandboxes/sb1/cdp/devtools/browser/") {
			t.Fatalf("version: %v", version)
		}
		var list []map[string]any
		if e := callJSON(t, sb, http.MethodGet, "/cdp/json/list", hdr, nil, &list); e != nil || len(list) == 0 {
			t.Fatalf("list: %v %v", e, list)
		}
		for _, target := range list {
			ws, _ := target["webSocketDebuggerUrl"].(string)
			front, _ := target["devtoolsFrontendUrl"].(string)
			if !strings.HasPrefix(ws, "wss://gw.example.com/sandboxes/sb1/cdp/devtools/page/") || !strings.Contains(front, "wss=gw.example.com/sandboxes/sb1/cdp/devtools/page/") {
				t.Fatalf("target not rewritten: %v", target)
			}
		}
		var created map[string]any
		if e := callJSON(t, sb, http.MethodPut, "/cdp/json/new?about:blank", nil, nil, &created); e != nil {
			t.Fatal(e)
		}
		if ws, _ := created["webSocketDebuggerUrl"].(string); !strings.HasPrefix(ws, "ws://"+strings.TrimPrefix(sb.URL, "http://")+"/cdp/devtools/page/") {
			t.Fatalf("new: %v", created)
		}
		// Old clients GET /json/new; Chromium only takes PUT since 111, so the agent converts.
		var created2 map[string]any
		if e := callJSON(t, sb, http.MethodGet, "/cdp/json/new?about:blank", nil, nil, &created2); e != nil || created2["id"] == nil {
			t.Fatalf("GET new: %v %v", e, created2)
		}
		if e := callJSON(t, sb, http.MethodGet, "/cdp/json/close/"+created2["id"].(string), nil, nil, nil); e != nil {
			t.Fatalf("close: %v", e)
		}
		// A target that does not exist is a typed 404, not an accepted-then-dropped WebSocket.
		_, resp, err := websocket.Dial(ctx, wsURL(sb, "/cdp/devtools/page/NOSUCHTARGET"), &websocket.DialOptions{HTTPHeader: http.Header{agentapi.TokenHeader: {sb.Token}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unknown target: %v %v", err, resp)
		}
	})

	t.Run("playwright connectOverCDP", func(t *testing.T) {
		out := runPlaywright(t, sb.URL+"/cdp", sb.Token, pageURL)
		if out["title"] != "Hello Sandgate" {
			t.Fatalf("playwright: %v", out)
		}
		// browser.close() of a CDP connection must leave the shared browser for the next client.
		out = runPlaywright(t, sb.URL+"/cdp", sb.Token, pageURL)
		if out["title"] != "Hello Sandgate" {
			t.Fatalf("second playwright connection: %v", out)
		}
	})

	t.Run("rest helpers", func(t *testing.T) {
		var nav agentapi.BrowserNavigateResult
		if e := callJSON(t, sb, http.MethodPost, "/v1/browser/navigate", nil, agentapi.BrowserNavigateRequest{URL: pageURL}, &nav); e != nil {
			t.Fatal(e)
		}
		if nav.Title != "Hello Sandgate" || nav.URL != pageURL || nav.TargetID == "" {
			t.Fatalf("navigate: %+v", nav)
		}
		var text agentapi.BrowserTextResult
		if e := callJSON(t, sb, http.MethodPost, "/v1/browser/text", nil, nil, &text); e != nil {
			t.Fatal(e)
		}
		if !strings.Contains(text.Text, "Inside the sandbox") || text.URL != pageURL {
			t.Fatalf("text (same page as navigate): %+v", text)
		}
		var ev agentapi.BrowserEvaluateResult
		if e := callJSON(t, sb, http.MethodPost, "/v1/browser/evaluate", nil, agentapi.BrowserEvaluateRequest{Expression: "({n: 1 + 2, h: document.querySelector('h1').textContent})"}, &ev); e != nil {
			t.Fatal(e)
		}
		if string(ev.Value) != `{"n":3,"h":"Inside the sandbox"}` {
			t.Fatalf("evaluate: %s", ev.Value)
		}
		if e := callJSON(t, sb, http.MethodPost, "/v1/browser/evaluate", nil, agentapi.BrowserEvaluateRequest{Expression: "throw new Error('boom')"}, nil); e == nil || e.Code != agentapi.CodeBrowserError || !strings.Contains(e.Message, "boom") {
			t.Fatalf("throwing expression: %+v", e)
		}
		for _, full := range []bool{false, true} {
			var shot agentapi.BrowserScreenshotResult
			if e := callJSON(t, sb, http.MethodPost, "/v1/browser/screenshot", nil, agentapi.BrowserScreenshotRequest{FullPage: full}, &shot); e != nil {
				t.Fatal(e)
			}
			raw, err := base64.StdEncoding.DecodeString(shot.Data)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(raw))
			if err != nil || img.Bounds().Dx() < 200 {
				t.Fatalf("screenshot (full_page=%v) is not a PNG: %v", full, err)
			}
			if full {
				_ = os.WriteFile(filepath.Join(t.TempDir(), "page.png"), raw, 0o644)
			}
		}
		if e := callJSON(t, sb, http.MethodPost, "/v1/browser/navigate", nil, agentapi.BrowserNavigateRequest{URL: "not a url"}, nil); e == nil || e.Code != agentapi.CodeInvalidRequest {
			t.Fatalf("bad url: %+v", e)
		}
		if e := callJSON(t, sb, http.MethodPost, "/v1/browser/navigate", nil, agentapi.BrowserNavigateRequest{URL: "http://127.0.0.1:9/"}, nil); e == nil || e.Code != agentapi.CodeBrowserError || e.Status() != 422 {
			t.Fatalf("refused url: %+v", e)
		}
	})

	t.Run("vnc websocket", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, testenv.WaitLimit)
		defer cancel()
		c, _, err := websocket.Dial(cctx, wsURL(sb, "/vnc/websockify"), &websocket.DialOptions{
			HTTPHeader: http.Header{agentapi.TokenHeader: {sb.Token}}, Subprotocols: []string{"binary"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if c.Subprotocol() != "binary" {
			t.Fatalf("subprotocol %q", c.Subprotocol())
		}
		typ, msg, err := c.Read(cctx)
		if err != nil || typ != websocket.MessageBinary || !strings.HasPrefix(string(msg), "RFB 003.008") {
			t.Fatalf("%v %v %q", err, typ, msg)
		}
	})

	t.Run("vnc view-only for read permission", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, testenv.WaitLimit)
		defer cancel()
		c, _, err := websocket.Dial(cctx, wsURL(sb, "/vnc/websockify"), &websocket.DialOptions{
			HTTPHeader:   http.Header{agentapi.TokenHeader: {sb.Token}, "X-Sandgate-Permission": {"read"}},
			Subprotocols: []string{"binary"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		rfb := websocket.NetConn(cctx, c, websocket.MessageBinary)
		read := func(n int) []byte {
			b := make([]byte, n)
			if _, err := io.ReadFull(rfb, b); err != nil {
				t.Fatalf("reading %d bytes: %v", n, err)
			}
			return b
		}
		write := func(b ...byte) {
			if _, err := rfb.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		if v := read(12); string(v) != "RFB 003.008\n" {
			t.Fatalf("version %q", v)
		}
		write([]byte("RFB 003.008\n")...)
		types := read(int(read(1)[0]))
		if !strings.ContainsRune(string(types), 1) {
			t.Fatalf("security types %v, want None (1)", types)
		}
		write(1)
		if res := read(4); string(res) != "\x00\x00\x00\x00" {
			t.Fatalf("security result %v", res)
		}
		write(0) // exclusive: the bridge makes it shared
		init := read(24)
		read(int(init[20])<<24 | int(init[21])<<16 | int(init[22])<<8 | int(init[23]))
		w, h := int(init[0])<<8|int(init[1]), int(init[2])<<8|int(init[3])
		// Input is dropped, pixels still flow: a key, a click, then a full update request.
		write(4, 1, 0, 0, 0, 0, 0, 0x61)
		write(5, 1, 0, 10, 0, 10)
		write(3, 0, 0, 0, 0, 0, byte(w>>8), byte(w), byte(h>>8), byte(h))
		// The server may speak first (clipboard, bell, colour map): skip those until the FramebufferUpdate.
		for update := false; !update; {
			switch typ := read(1)[0]; typ {
			case 0: // FramebufferUpdate
				update = true
			case 1: // SetColourMapEntries: padding, first colour, count, 6 bytes a colour
				h := read(5)
				read(6 * (int(h[3])<<8 | int(h[4])))
			case 2: // Bell
			case 3: // ServerCutText: padding, length (negative: Extended Clipboard), text
				h := read(7)
				n := int32(uint32(h[3])<<24 | uint32(h[4])<<16 | uint32(h[5])<<8 | uint32(h[6]))
				if n < 0 {
					n = -n
				}
				read(int(n))
			default:
				t.Fatalf("server message type %d, want FramebufferUpdate (0)", typ)
			}
		}
		// A message the filter cannot frame closes the stream with a reason.
		write(9, 0, 0, 0)
		drain := make([]byte, 64<<10)
		for err == nil {
			_, err = rfb.Read(drain)
		}
		if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Fatalf("want close 1008 after an unknown message, got %v", err)
		}
	})

	t.Run("ws max message", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(cctx, wsURL(sb, "/cdp"), &websocket.DialOptions{
			HTTPHeader: http.Header{agentapi.TokenHeader: {sb.Token}, agentapi.HeaderWSMaxMessage: {"64"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		_ = c.Write(cctx, websocket.MessageText, []byte(`{"id":1,"method":"Browser.getVersion","params":{"padding":"`+strings.Repeat("x", 200)+`"}}`))
		_, _, err = c.Read(cctx)
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("want close 1009, got %v", err)
		}
	})

	t.Run("browser close filter keeps chromium", func(t *testing.T) {
		before := browserID(t, sb)
		for _, how := range []struct {
			path string
			hdr  http.Header
		}{
			{"/cdp?filter=browser_close", nil},
			{"/cdp/devtools/browser/" + before, http.Header{agentapi.CDPFilterHeader: {agentapi.CDPFilterBrowserClose}}},
		} {
			reply := cdpCall(t, sb, how.path, how.hdr, `{"id":41,"method":"Browser.close"}`)
			if reply != `{"id":41,"result":{}}` {
				t.Fatalf("%s: reply %s", how.path, reply)
			}
		}
		// Browser.crash is answered too; messages the filter cannot read exactly as Chromium would end the
		// connection (1008) and never reach Chromium.
		if reply := cdpCall(t, sb, "/cdp?filter=browser_close", nil, `{"id":47,"method":"Browser.crash"}`); reply != `{"id":47,"result":{}}` {
			t.Fatalf("Browser.crash: reply %s", reply)
		}
		for _, msg := range []string{`{"id":1.0,"method":"Browser.close"}`, `{"id":44,"method":"Browser.getVersion","method":"Browser.close"}`,
			`{"id":45,"sessionId":5,"method":"Browser.close"}`, "{\"id\":46,\"method\":\"Browser.close\",\"params\":{\"x\":\"\xff\"}}"} {
			if reply := cdpCall(t, sb, "/cdp?filter=browser_close", nil, msg); reply != "" {
				t.Fatalf("%q through the filter: reply %s", msg, reply)
			}
		}
		// Other commands still pass.
		if reply := cdpCall(t, sb, "/cdp?filter=browser_close", nil, `{"id":42,"method":"Browser.getVersion"}`); !strings.Contains(reply, `"product"`) {
			t.Fatalf("getVersion through filter: %s", reply)
		}
		if after := browserID(t, sb); after != before {
			t.Fatalf("chromium restarted (%s -> %s) although Browser.close was filtered", before, after)
		}
	})

	t.Run("unfiltered browser close restarts chromium", func(t *testing.T) {
		before := browserID(t, sb)
		cdpCall(t, sb, "/cdp", nil, `{"id":43,"method":"Browser.close"}`)
		deadline := time.Now().Add(testenv.WaitLimit)
		for {
			var version map[string]any
			if e := callJSON(t, sb, http.MethodGet, "/cdp/json/version", nil, nil, &version); e == nil {
				if id := idFrom(version); id != "" && id != before {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("chromium did not come back after Browser.close")
			}
			time.Sleep(200 * time.Millisecond)
		}
		out := runPlaywright(t, sb.URL+"/cdp", sb.Token, pageURL)
		if out["title"] != "Hello Sandgate" {
			t.Fatalf("playwright after restart: %v", out)
		}
		// The REST helpers find their page gone and open a new one.
		var nav agentapi.BrowserNavigateResult
		if e := callJSON(t, sb, http.MethodPost, "/v1/browser/navigate", nil, agentapi.BrowserNavigateRequest{URL: pageURL}, &nav); e != nil || nav.Title != "Hello Sandgate" {
			t.Fatalf("navigate after restart: %v %+v", e, nav)
		}
	})

	if out, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", sb.Name).Output(); err == nil {
		t.Logf("browser sandbox memory (Chromium idle with a few tabs): %s", strings.TrimSpace(string(out)))
	}
}

func wsURL(sb *testenv.Sandbox, path string) string {
	return strings.Replace(sb.URL, "http://", "ws://", 1) + path
}

func idFrom(version map[string]any) string {
	ws, _ := version["webSocketDebuggerUrl"].(string)
	if i := strings.LastIndex(ws, "/"); i >= 0 {
		return ws[i+1:]
	}
	return ""
}

func browserID(t *testing.T, sb *testenv.Sandbox) string {
	t.Helper()
	var version map[string]any
	if e := callJSON(t, sb, http.MethodGet, "/cdp/json/version", nil, nil, &version); e != nil {
		t.Fatal(e)
	}
	return idFrom(version)
}

// cdpCall sends one raw CDP message over the agent's relay and returns the first reply with the same id ("" if the
// connection closed first).
func cdpCall(t *testing.T, sb *testenv.Sandbox, path string, hdr http.Header, msg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	h := http.Header{agentapi.TokenHeader: {sb.Token}}
	for k, v := range hdr {
		h[k] = v
	}
	c, _, err := websocket.Dial(ctx, wsURL(sb, path), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dialing %s: %v", path, err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		ID int64 `json:"id"`
	}
	_ = json.Unmarshal([]byte(msg), &sent)
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return ""
		}
		var got struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(data, &got) == nil && got.ID == sent.ID {
			return string(data)
		}
	}
}

const playwrightScript = `
const { chromium } = require('playwright-core');
(async () => {
  const [endpoint, token, url] = process.argv.slice(2);
  const browser = await chromium.connectOverCDP(endpoint, { headers: { 'X-Sandgate-Token': token }, timeout: 30000 });
  const context = browser.contexts()[0] || await browser.newContext();
  const page = await context.newPage();
  await page.goto(url);
  const out = { title: await page.title(), version: browser.version() };
  await page.close();
  await browser.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// runPlaywright connects Playwright (playwright-core from npm, launching nothing) to endpoint and loads url.
func runPlaywright(t *testing.T, endpoint, token, url string) map[string]any {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "build", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
			_ = os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"sandgate-test-clients","private":true}`), 0o644)
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "playwright-core@1")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install playwright-core: %v\n%s", err, out)
		}
	}
	script := filepath.Join(dir, "sandgate-cdp-title.js")
	if err := os.WriteFile(script, []byte(playwrightScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, endpoint, token, url)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("playwright: %v\n%s", err, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("playwright output %q: %v", out, err)
	}
	return res
}
