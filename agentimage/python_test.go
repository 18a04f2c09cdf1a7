package main_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// callJSON sends in as JSON to the agent and decodes a 2xx answer into out; any other answer is returned as the
// typed error.
func callJSON(t *testing.T, sb *testenv.Sandbox, method, path string, hdr http.Header, in, out any) *agentapi.Error {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := sb.Request(context.Background(), method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return agentapi.ReadError(resp, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return nil
}

func pyExec(t *testing.T, sb *testenv.Sandbox, code string, timeoutMS int64) (agentapi.PythonExecResult, *agentapi.Error) {
	t.Helper()
	var res agentapi.PythonExecResult
	e := callJSON(t, sb, http.MethodPost, "/v1/python/exec", nil, agentapi.PythonExecRequest{Code: code, TimeoutMS: timeoutMS}, &res)
	return res, e
}

// TestPythonKernelAndPortProxy runs one hardened base sandbox: the persistent kernel (state, trailing value,
// matplotlib figures, tracebacks, timeout interrupt, crash restart) and the port proxy (HTTP and WebSocket to
// servers started inside the sandbox, refusals).
func TestPythonKernelAndPortProxy(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"shell", "python"}})

	t.Run("state and trailing expression", func(t *testing.T) {
		if _, e := pyExec(t, sb, "import math\nradius = 2", 0); e != nil {
			t.Fatal(e)
		}
		res, e := pyExec(t, sb, "print('area follows')\nround(math.pi * radius ** 2, 3)", 0)
		if e != nil || !res.Success || res.Result == nil || *res.Result != "12.566" || res.Stdout != "area follows\n" || res.ExecutionCount != 2 {
			t.Fatalf("%v %+v", e, res)
		}
	})

	t.Run("matplotlib figure", func(t *testing.T) {
		code := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()"
		res, e := pyExec(t, sb, code, 60000)
		if e != nil || !res.Success || len(res.Images) != 1 {
			t.Fatalf("%v %+v", e, res)
		}
		raw, err := base64.StdEncoding.DecodeString(res.Images[0])
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil || img.Bounds().Dx() < 100 {
			t.Fatalf("figure is not a PNG: %v", err)
		}
		// Figures are closed after the cell: the next cell returns none.
		res, e = pyExec(t, sb, "len(plt.get_fignums())", 0)
		if e != nil || len(res.Images) != 0 || *res.Result != "0" {
			t.Fatalf("figures not closed: %v %+v", e, res)
		}
	})

	t.Run("traceback", func(t *testing.T) {
		res, e := pyExec(t, sb, "def f(x):\n    return {}[x]\nf('missing')", 0)
		if e != nil || res.Success || res.Error == nil || res.Error.EName != "KeyError" || res.Error.EValue != "'missing'" {
			t.Fatalf("%v %+v", e, res)
		}
		tb := strings.Join(res.Error.Traceback, "")
		if !strings.Contains(tb, "return {}[x]") || !strings.Contains(tb, "line 2, in f") {
			t.Fatalf("traceback does not show the cell's source: %s", tb)
		}
	})

	t.Run("timeout interrupts and state survives", func(t *testing.T) {
		res, e := pyExec(t, sb, "import time\ntime.sleep(60)", 500)
		if e != nil || !res.TimedOut || res.Error == nil || res.Error.EName != "KeyboardInterrupt" {
			t.Fatalf("%v %+v", e, res)
		}
		res, e = pyExec(t, sb, "radius", 0)
		if e != nil || *res.Result != "2" || res.KernelRestarted {
			t.Fatalf("state lost after timeout: %v %+v", e, res)
		}
	})

	t.Run("crash restarts with a clear error", func(t *testing.T) {
		_, e := pyExec(t, sb, "import os\nos._exit(3)", 0)
		if e == nil || e.Code != agentapi.CodeKernelDied || e.Status() != http.StatusInternalServerError {
			t.Fatalf("want kernel_died, got %+v", e)
		}
		res, e := pyExec(t, sb, "'radius' in globals()", 0)
		if e != nil || !res.KernelRestarted || *res.Result != "False" {
			t.Fatalf("%v %+v", e, res)
		}
		var rr agentapi.PythonRestartResult
		if e := callJSON(t, sb, http.MethodPost, "/v1/python/restart", nil, nil, &rr); e != nil || !strings.HasPrefix(rr.PythonVersion, "3.") {
			t.Fatalf("restart: %v %+v", e, rr)
		}
	})

	t.Run("bad request", func(t *testing.T) {
		req, _ := sb.Request(context.Background(), http.MethodPost, "/v1/python/exec", strings.NewReader("{not json"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if e := agentapi.ReadError(resp, raw); resp.StatusCode != 400 || e.Code != agentapi.CodeInvalidRequest {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
	})

	t.Run("no browser here", func(t *testing.T) {
		for _, path := range []string{"/v1/browser/info", "/cdp/json/version", "/vnc/websockify"} {
			if e := callJSON(t, sb, http.MethodGet, path, nil, nil, nil); e == nil || e.Code != agentapi.CodeNotSupported || e.Status() != 501 {
				t.Errorf("%s: %+v", path, e)
			}
		}
	})

	t.Run("round trip", func(t *testing.T) {
		var d []time.Duration
		for range 15 {
			start := time.Now()
			if _, e := pyExec(t, sb, "1 + 1", 0); e != nil {
				t.Fatal(e)
			}
			d = append(d, time.Since(start))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("python exec round trip: median %v, min %v, max %v", d[len(d)/2], d[0], d[len(d)-1])
	})

	// Servers inside the sandbox for the proxy: a static site and a stdlib WebSocket echo.
	sb.Exec(t, "sh", "-c", "mkdir -p /tmp/site && echo '<title>proxied</title>hello from inside' > /tmp/site/index.html")
	dockerExecDetached(t, sb, "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp/site")
	dockerExecDetached(t, sb, "python3", "-c", wsEchoServer, "8001")
	waitProxy(t, sb, "/proxy/8000/")

	t.Run("proxy http", func(t *testing.T) {
		for _, path := range []string{"/proxy/8000/index.html", "/absproxy/8000/"} {
			req, _ := sb.Request(context.Background(), http.MethodGet, path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusOK
			if strings.HasPrefix(path, "/absproxy") {
				want = http.StatusNotFound // http.server has no /absproxy/8000/: the prefix was kept
			}
			if resp.StatusCode != want || (want == 200 && !strings.Contains(string(body), "hello from inside")) {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
			}
		}
	})

	t.Run("proxy websocket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
		defer cancel()
		u := strings.Replace(sb.URL, "http://", "ws://", 1) + "/proxy/8001/echo"
		// The echo server was started in the background: retry until it listens.
		var c *websocket.Conn
		for {
			var err error
			c, _, err = websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{agentapi.TokenHeader: {sb.Token}}})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		defer c.CloseNow()
		if err := c.Write(ctx, websocket.MessageText, []byte("ping through the proxy")); err != nil {
			t.Fatal(err)
		}
		_, msg, err := c.Read(ctx)
		if err != nil || string(msg) != "echo: ping through the proxy" {
			t.Fatalf("%v %q", err, msg)
		}
	})

	t.Run("proxy refusals", func(t *testing.T) {
		for _, tc := range []struct {
			path   string
			status int
			code   string
		}{
			{"/proxy/7777/health", 403, agentapi.CodePortNotAllowed},
			{"/proxy/8999/", 502, agentapi.CodeUpstreamUnavailable},
			{"/proxy/70000/", 400, agentapi.CodeInvalidRequest},
		} {
			e := callJSON(t, sb, http.MethodGet, tc.path, nil, nil, nil)
			if e == nil || e.Code != tc.code || e.Status() != tc.status {
				t.Errorf("%s: %+v", tc.path, e)
			}
		}
	})
}

func dockerExecDetached(t *testing.T, sb *testenv.Sandbox, argv ...string) {
	t.Helper()
	if out, err := exec.Command("docker", append([]string{"exec", "-d", sb.Name}, argv...)...).CombinedOutput(); err != nil {
		t.Fatalf("docker exec -d %v: %v %s", argv, err, out)
	}
}

// waitProxy polls path until the proxied server answers something other than upstream_unavailable.
func waitProxy(t *testing.T, sb *testenv.Sandbox, path string) {
	t.Helper()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		req, _ := sb.Request(context.Background(), http.MethodGet, path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v", path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wsEchoServer is a minimal WebSocket echo server using only Python's standard library (RFC 6455: handshake, one
// unfragmented masked client frame at a time, unmasked text replies).
const wsEchoServer = `
import base64, hashlib, socketserver, struct, sys
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        headers = {}
        self.rfile.readline()
        while True:
            line = self.rfile.readline().decode().strip()
            if not line:
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()).decode()
        self.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            op, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.wfile.write(b"\x88\x00")
                return
            if op == 1:
                out = b"echo: " + data
                self.wfile.write(bytes([0x81, len(out)]) + out if len(out) < 126 else bytes([0x81, 126]) + struct.pack(">H", len(out)) + out)
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("127.0.0.1", int(sys.argv[1])), Echo).serve_forever()
`
