package codeinterp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// These run the real kernels with the machine's python3 and node (the image tests run them in the sandbox image).
func newTestServer(t *testing.T, cfg Config) (*httptest.Server, *Service) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	s := New(cfg)
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return srv, s
}

type line = map[string]any

// execute posts body to /execute and returns its lines; each line is handed to each first (it may act on it).
func execute(t *testing.T, ctx context.Context, srv *httptest.Server, hdr http.Header, body any, each func(line)) ([]line, int) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+agentapi.E2BCodePrefix+"/execute", bytes.NewReader(b))
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Logf("status %d: %s", resp.StatusCode, raw)
		return nil, resp.StatusCode
	}
	var lines []line
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		if each != nil {
			each(l)
		}
		lines = append(lines, l)
	}
	return lines, resp.StatusCode
}

// summary is the lines without keepalives, as "type:text" strings for comparison. Consecutive pieces of one stream
// are joined: how the kernel's writes fall into lines is not part of the contract.
func summary(lines []line) []string {
	var out []string
	prev := ""
	for _, l := range lines {
		typ, _ := l["type"].(string)
		switch l["type"] {
		case lineKeepalive:
			continue
		case lineStdout, lineStderr:
			if prev == typ {
				out[len(out)-1] += l["text"].(string)
				continue
			}
			out = append(out, l["type"].(string)+":"+l["text"].(string))
		case lineResult:
			out = append(out, "result:"+str(l["text"]))
		case lineError:
			out = append(out, "error:"+str(l["name"]))
		case lineCount:
			out = append(out, "count:"+strings.TrimSuffix(strings.TrimSuffix(jsonString(l["execution_count"]), ".0"), "\n"))
		default:
			out = append(out, l["type"].(string))
		}
		prev = typ
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+agentapi.E2BCodePrefix+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func TestExecutePython(t *testing.T) {
	srv, _ := newTestServer(t, Config{})
	ctx := context.Background()
	tests := []struct {
		name string
		body any
		want string
	}{
		{"assign", ExecuteRequest{Code: "x = 40"}, "count:1 end_of_execution"},
		{"state and main result", ExecuteRequest{Code: "print('hi')\nx + 2"}, "count:2 stdout:hi\n result:42 end_of_execution"},
		{"stderr", ExecuteRequest{Code: "import sys; _ = sys.stderr.write('warn\\n')"}, "count:3 stderr:warn\n end_of_execution"},
		{"exception", ExecuteRequest{Code: "1/0"}, "count:4 error:ZeroDivisionError end_of_execution"},
		{"env for one execution", ExecuteRequest{Code: "import os; os.environ['E2B_T']", EnvVars: map[string]string{"E2B_T": "one"}}, "count:5 result:'one' end_of_execution"},
		{"env restored", ExecuteRequest{Code: "os.environ.get('E2B_T')"}, "count:6 end_of_execution"},
		{"language python is the default context", ExecuteRequest{Code: "x", Language: "python3"}, "count:7 result:40 end_of_execution"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, status := execute(t, ctx, srv, nil, tc.body, nil)
			if got := strings.Join(summary(lines), " "); status != 200 || got != tc.want {
				t.Fatalf("status %d, lines %q, want %q", status, got, tc.want)
			}
		})
	}
	t.Run("error has value and traceback", func(t *testing.T) {
		lines, _ := execute(t, ctx, srv, nil, ExecuteRequest{Code: "def f():\n    raise ValueError('bad thing')\nf()"}, nil)
		for _, l := range lines {
			if l["type"] == lineError {
				if l["value"] != "bad thing" || !strings.Contains(str(l["traceback"]), "in f") {
					t.Fatalf("%v", l)
				}
				return
			}
		}
		t.Fatalf("no error in %v", lines)
	})
	t.Run("rich result", func(t *testing.T) {
		code := "class T:\n    def _repr_html_(self): return '<b>t</b>'\n    def __repr__(self): return 'T()'\nT()"
		lines, _ := execute(t, ctx, srv, nil, ExecuteRequest{Code: code}, nil)
		for _, l := range lines {
			if l["type"] == lineResult {
				if l["text"] != "T()" || l["html"] != "<b>t</b>" || l["is_main_result"] != true {
					t.Fatalf("%v", l)
				}
				return
			}
		}
		t.Fatalf("no result in %v", lines)
	})
}

// TestExecuteStreamsOutput: stdout reaches the client while the cell still runs. The cell waits for a file the
// test writes only after it has read the first line.
func TestExecuteStreamsOutput(t *testing.T) {
	srv, _ := newTestServer(t, Config{})
	flag := filepath.Join(t.TempDir(), "go")
	code := "import os, time\nprint('first', flush=True)\nfor _ in range(3000):\n    if os.path.exists(" + jsonString(flag) + "): break\n    time.sleep(0.01)\nprint('second')"
	sawFirst := false
	lines, _ := execute(t, context.Background(), srv, nil, ExecuteRequest{Code: code}, func(l line) {
		if l["type"] == lineStdout && strings.Contains(str(l["text"]), "first") && !sawFirst {
			sawFirst = true
			if err := os.WriteFile(flag, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
	})
	got := strings.Join(summary(lines), " ")
	if !sawFirst || got != "count:1 stdout:first\nsecond\n end_of_execution" {
		t.Fatalf("lines %q", got)
	}
}

// TestExecuteKeepalive: a silent cell gets keepalive lines; the stream still ends with end_of_execution.
func TestExecuteKeepalive(t *testing.T) {
	srv, _ := newTestServer(t, Config{Keepalive: 30 * time.Millisecond})
	flag := filepath.Join(t.TempDir(), "go")
	code := "import os, time\nfor _ in range(3000):\n    if os.path.exists(" + jsonString(flag) + "): break\n    time.sleep(0.01)\n'done'"
	keepalives := 0
	lines, _ := execute(t, context.Background(), srv, nil, ExecuteRequest{Code: code}, func(l line) {
		if l["type"] == lineKeepalive {
			if keepalives++; keepalives == 3 { // the first goes out at once; two more came from silence
				_ = os.WriteFile(flag, nil, 0o600)
			}
		}
	})
	if keepalives < 3 || lines[len(lines)-1]["type"] != lineEnd {
		t.Fatalf("%d keepalives, lines %v", keepalives, summary(lines))
	}
}

// TestExecuteClientLeaves: a client that disconnects interrupts its Python cell, so the context is free at once for
// the next execution (without it, the endless cell would hold the kernel until the server's own timeout).
func TestExecuteClientLeaves(t *testing.T) {
	srv, _ := newTestServer(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	lines, _ := execute(t, ctx, srv, nil, ExecuteRequest{Code: "print('looping', flush=True)\nwhile True: pass"}, func(l line) {
		if l["type"] == lineStdout {
			cancel()
		}
	})
	_ = lines
	next, _ := execute(t, context.Background(), srv, nil, ExecuteRequest{Code: "'free'"}, nil)
	if got := strings.Join(summary(next), " "); got != "count:2 result:'free' end_of_execution" {
		t.Fatalf("next execution %q", got)
	}
}

func TestContexts(t *testing.T) {
	srv, s := newTestServer(t, Config{MaxContexts: 3})
	ctx := context.Background()
	sub := filepath.Join(s.cfg.Workspace, "proj")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}

	status, raw := call(t, srv, http.MethodPost, "/contexts", `{"cwd":"/home/user/proj"}`)
	var c codeContext
	if status != 200 || json.Unmarshal(raw, &c) != nil || c.Language != LangPython || c.Cwd != "/home/user/proj" || CheckContextID(c.ID) != nil {
		t.Fatalf("create: %d %s", status, raw)
	}
	t.Run("cwd /home/user is the workspace", func(t *testing.T) {
		lines, _ := execute(t, ctx, srv, nil, ExecuteRequest{Code: "import os; os.getcwd()", ContextID: c.ID}, nil)
		if got := strings.Join(summary(lines), " "); got != "count:1 result:"+jsonQuotePy(sub)+" end_of_execution" {
			t.Fatalf("%q", got)
		}
	})
	t.Run("state is per context", func(t *testing.T) {
		execute(t, ctx, srv, nil, ExecuteRequest{Code: "y = 'ctx'", ContextID: c.ID}, nil)
		lines, _ := execute(t, ctx, srv, nil, ExecuteRequest{Code: "y"}, nil)
		if got := strings.Join(summary(lines), " "); !strings.Contains(got, "error:NameError") {
			t.Fatalf("default context sees y: %q", got)
		}
	})
	t.Run("list", func(t *testing.T) {
		status, raw := call(t, srv, http.MethodGet, "/contexts", "")
		var list []codeContext
		if status != 200 || json.Unmarshal(raw, &list) != nil || len(list) != 2 || list[0].ID != c.ID {
			t.Fatalf("%d %s", status, raw)
		}
	})
	t.Run("restart forgets", func(t *testing.T) {
		if status, raw := call(t, srv, http.MethodPost, "/contexts/"+c.ID+"/restart", ""); status != 200 {
			t.Fatalf("%d %s", status, raw)
		}
		lines, _ := execute(t, ctx, srv, nil, ExecuteRequest{Code: "y", ContextID: c.ID}, nil)
		if got := strings.Join(summary(lines), " "); got != "count:1 error:NameError end_of_execution" {
			t.Fatalf("%q", got)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, body string
			status             int
		}{
			{http.MethodPost, "/contexts", `{"language":"java"}`, 400},
			{http.MethodPost, "/contexts", `{"cwd":"/nonexistent/dir"}`, 400},
			{http.MethodPost, "/contexts/nope/restart", ``, 404},
			{http.MethodDelete, "/contexts/nope", ``, 404},
			{http.MethodDelete, "/contexts/bad.id", ``, 400},
			{http.MethodPost, "/execute", `{"code":"1","context_id":"nope"}`, 404},
			{http.MethodPost, "/execute", `{"code":"1","context_id":"` + c.ID + `","language":"python"}`, 400},
			{http.MethodPost, "/execute", `{"code":"1","language":"java"}`, 400},
		} {
			if status, raw := call(t, srv, tc.method, tc.path, tc.body); status != tc.status {
				t.Errorf("%s %s %s: %d %s, want %d", tc.method, tc.path, tc.body, status, raw, tc.status)
			}
		}
	})
	t.Run("bounded number", func(t *testing.T) {
		if status, raw := call(t, srv, http.MethodPost, "/contexts", `{}`); status != 200 {
			t.Fatalf("third: %d %s", status, raw)
		}
		if status, raw := call(t, srv, http.MethodPost, "/contexts", `{}`); status != http.StatusConflict {
			t.Fatalf("fourth: %d %s", status, raw)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if status, raw := call(t, srv, http.MethodDelete, "/contexts/"+c.ID, ""); status != 200 {
			t.Fatalf("%d %s", status, raw)
		}
		if _, status := execute(t, ctx, srv, nil, ExecuteRequest{Code: "1", ContextID: c.ID}, nil); status != 404 {
			t.Fatalf("deleted context answered %d", status)
		}
	})
	t.Run("health", func(t *testing.T) {
		if status, raw := call(t, srv, http.MethodGet, "/health", ""); status != 200 || strings.TrimSpace(string(raw)) != `"OK"` {
			t.Fatalf("%d %s", status, raw)
		}
	})
}

// jsonQuotePy is Python's repr of a plain path.
func jsonQuotePy(s string) string { return "'" + s + "'" }

// TestSandboxEnvHeader: the gateway's sandbox-wide env reaches the context's kernel; a malformed header is refused.
func TestSandboxEnvHeader(t *testing.T) {
	srv, _ := newTestServer(t, Config{})
	hdr := http.Header{}
	hdr.Set(agentapi.E2BEnvHeader, `{"SANDBOX_WIDE":"yes"}`)
	lines, _ := execute(t, context.Background(), srv, hdr, ExecuteRequest{Code: "import os; os.environ['SANDBOX_WIDE']"}, nil)
	if got := strings.Join(summary(lines), " "); got != "count:1 result:'yes' end_of_execution" {
		t.Fatalf("%q", got)
	}
	hdr.Set(agentapi.E2BEnvHeader, `{"A=B":"x"}`)
	if _, status := execute(t, context.Background(), srv, hdr, ExecuteRequest{Code: "1"}, nil); status != 400 {
		t.Fatalf("bad header: %d", status)
	}
}

func TestExecuteJavaScript(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	srv, _ := newTestServer(t, Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		body ExecuteRequest
		want string
	}{
		{"state", ExecuteRequest{Code: "let n = 41", Language: "js"}, "count:1 end_of_execution"},
		{"output and result", ExecuteRequest{Code: "console.log('hi'); n + 1", Language: "javascript"}, "count:2 stdout:hi\n result:42 end_of_execution"},
		{"error", ExecuteRequest{Code: "null.x", Language: "js"}, "count:3 error:TypeError end_of_execution"},
		{"env for one execution", ExecuteRequest{Code: "process.env.E2B_T", Language: "js", EnvVars: map[string]string{"E2B_T": "v"}}, "count:4 result:'v' end_of_execution"},
		{"env restored", ExecuteRequest{Code: "process.env.E2B_T", Language: "js"}, "count:5 end_of_execution"},
		{"typescript is its own context", ExecuteRequest{Code: "typeof n", Language: "ts"}, "count:1 result:'undefined' end_of_execution"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, status := execute(t, ctx, srv, nil, tc.body, nil)
			if got := strings.Join(summary(lines), " "); status != 200 || got != tc.want {
				t.Fatalf("status %d, lines %q, want %q", status, got, tc.want)
			}
		})
	}
}

// TestExecuteStreamsJavaScript: a Node cell's output reaches the client while the cell still runs. The cell waits
// for a file the test writes only after it has read the first line; output printed between cells (a timer) comes
// first in the next one, and nothing arrives twice.
func TestExecuteStreamsJavaScript(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	srv, _ := newTestServer(t, Config{})
	flag := filepath.Join(t.TempDir(), "go")
	// The timer prints between the cells, then says so: the next cell is sent only after that (a timer due in 1 ms
	// can fire after a next cell that arrives sooner, and its output is then that cell's successor's).
	printed := filepath.Join(t.TempDir(), "late-printed")
	code := "console.log('first'); console.error('err');\nconst fs = require('fs');\n" +
		"const started = Date.now(); const seen = await new Promise((r) => { const t = setInterval(() => {\n" +
		"  if (fs.existsSync(" + jsonString(flag) + ")) { clearInterval(t); r(true) } else if (Date.now() - started > 30000) { clearInterval(t); r(false) } }, 10) });\n" +
		"setTimeout(() => { console.log('late'); fs.writeFileSync(" + jsonString(printed) + ", '') }, 0); console.log(seen ? 'second' : 'no flag')"
	sawFirst := false
	lines, _ := execute(t, context.Background(), srv, nil, ExecuteRequest{Code: code, Language: "js"}, func(l line) {
		if l["type"] == lineStdout && strings.Contains(str(l["text"]), "first") && !sawFirst {
			sawFirst = true
			if err := os.WriteFile(flag, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
	})
	got := strings.Join(summary(lines), " ")
	if !sawFirst || !strings.Contains(got, "stdout:first\n") || !strings.Contains(got, "stderr:err\n") || !strings.HasSuffix(got, "stdout:second\n end_of_execution") {
		t.Fatalf("lines %q", got)
	}
	waitForFile(t, printed)
	lines, _ = execute(t, context.Background(), srv, nil, ExecuteRequest{Code: "1", Language: "js"}, nil)
	if got := strings.Join(summary(lines), " "); got != "count:2 stdout:late\n result:1 end_of_execution" {
		t.Fatalf("next cell: %q", got)
	}
}

// waitForFile waits until path exists (a cell's timer writes it); the test's deadline bounds the wait.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
