package ideagent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

type testAgent struct {
	*Agent
	root, home string
}

func startAgent(t *testing.T) *testAgent {
	t.Helper()
	root, home := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := Start(ctx, Config{Addr: "127.0.0.1:0", PreviewAddr: "127.0.0.1:0", Workspace: root, Home: home,
		Shell: "/bin/bash", MaxFileBytes: 1 << 20, debounce: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &testAgent{Agent: a, root: root, home: home}
}

func (a *testAgent) url(channel, token, perm string) string {
	u := "ws://" + a.WSAddr + channel + "?token=" + token
	if perm != "" {
		u += "&permission=" + perm
	}
	return u
}

func (a *testAgent) dial(t *testing.T, channel, perm string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, a.url(channel, a.password, perm), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func TestPassword(t *testing.T) {
	a := startAgent(t)
	b, err := os.ReadFile(filepath.Join(a.home, PasswordFileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 43 || strings.ContainsAny(string(b), "+/=") || string(b) != a.password {
		t.Fatalf("password %q", b)
	}
	again, err := ensurePassword(filepath.Join(a.home, PasswordFileName))
	if err != nil || again != a.password {
		t.Fatalf("password not reused: %q %v", again, err)
	}
	if err := os.WriteFile(filepath.Join(a.home, PasswordFileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, _ := ensurePassword(filepath.Join(a.home, PasswordFileName)); p == "" || p == a.password {
		t.Fatalf("empty file not refilled: %q", p)
	}
}

func TestHandshake(t *testing.T) {
	a := startAgent(t)
	for _, tc := range []struct{ name, path, token, perm, want string }{
		{"other path", "/files", a.password, "write", "Unauthorized: unknown channel"},
		{"prefixed path", "/sandbox/fs", a.password, "write", "Unauthorized: unknown channel"},
		{"missing token", "/fs", "", "read", "Unauthorized: missing token"},
		{"wrong token", "/fs", "nope", "read", "Unauthorized: invalid token"},
		{"bad permission", "/fs", a.password, "admin", "Unauthorized: invalid permission"},
		{"terminal read", "/terminal", a.password, "read", "Unauthorized: terminal requires write permission"},
		{"terminal default", "/terminal", a.password, "", "Unauthorized: terminal requires write permission"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, resp, err := websocket.Dial(ctx, a.url(tc.path, tc.token, tc.perm), nil)
			if err == nil || resp == nil || resp.StatusCode != 401 {
				t.Fatalf("want 401, got %v %v", resp, err)
			}
			if body, _ := io.ReadAll(resp.Body); string(body) != tc.want {
				t.Fatalf("body %q, want %q", body, tc.want)
			}
		})
	}
}

type rpcClient struct {
	t    *testing.T
	c    *websocket.Conn
	id   int
	note []json.RawMessage
}

type rpcReply struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

func (r *rpcClient) call(method string, params any) rpcReply {
	r.t.Helper()
	r.id++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.c.Write(ctx, websocket.MessageText, b); err != nil {
		r.t.Fatal(err)
	}
	for {
		_, data, err := r.c.Read(ctx)
		if err != nil {
			r.t.Fatalf("%s: %v", method, err)
		}
		var rep rpcReply
		if err := json.Unmarshal(data, &rep); err != nil {
			r.t.Fatal(err)
		}
		if rep.Method == "fs/did_change" {
			r.note = append(r.note, rep.Params)
			continue
		}
		if rep.ID != r.id {
			r.t.Fatalf("reply id %d, want %d", rep.ID, r.id)
		}
		return rep
	}
}

func (r *rpcClient) ok(method string, params any, into any) {
	r.t.Helper()
	rep := r.call(method, params)
	if rep.Error != nil {
		r.t.Fatalf("%s: error %d %s", method, rep.Error.Code, rep.Error.Message)
	}
	if into != nil {
		if err := json.Unmarshal(rep.Result, into); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *rpcClient) fails(method string, params any, code int, msg string) {
	r.t.Helper()
	rep := r.call(method, params)
	if rep.Error == nil || rep.Error.Code != code || (msg != "" && rep.Error.Message != msg) {
		r.t.Fatalf("%s: got %+v %s, want error %d %q", method, rep.Error, rep.Result, code, msg)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestFSMethods(t *testing.T) {
	a := startAgent(t)
	r := &rpcClient{t: t, c: a.dial(t, "/fs", "write")}

	// Unparsable frames are skipped; the connection goes on.
	_ = r.c.Write(context.Background(), websocket.MessageText, []byte("not json"))

	var w writeResult
	r.ok("fs/write_file", map[string]any{"path": "/src/app/main.go", "content": b64("package main\n")}, &w)
	var rf struct {
		Content string `json:"content"`
		Mtime   int64  `json:"mtime"`
		Etag    string `json:"etag"`
	}
	r.ok("fs/read_file", map[string]any{"path": "src/app/main.go"}, &rf)
	if got, _ := base64.StdEncoding.DecodeString(rf.Content); string(got) != "package main\n" || rf.Etag != w.Etag ||
		!strings.HasPrefix(rf.Etag, "sha256:") || rf.Mtime == 0 {
		t.Fatalf("read_file %+v (write %+v)", rf, w)
	}
	// Overwriting needs the current etag.
	r.fails("fs/write_file", map[string]any{"path": "src/app/main.go", "content": b64("x")}, -32001, "Data Conflict: The file has been modified elsewhere.")
	r.fails("fs/write_file", map[string]any{"path": "src/app/main.go", "content": b64("x"), "old_etag": "sha256:00"}, -32001, "")
	r.ok("fs/write_file", map[string]any{"path": "src/app/main.go", "content": b64("package main // v2\n"), "old_etag": rf.Etag}, &w)

	r.ok("fs/mkdir", map[string]any{"path": "src/empty/deeper"}, nil)
	r.ok("fs/write_file", map[string]any{"path": "node_modules/x/index.js", "content": b64("1")}, nil)
	var entries []dirEntry
	r.ok("fs/read_dir", map[string]any{"path": "src"}, &entries)
	if len(entries) != 2 || entries[0].Name != "app" || !entries[0].IsDir || entries[1].Name != "empty" {
		t.Fatalf("read_dir %+v", entries)
	}
	var tree treeResult
	r.ok("fs/read_dir_recursive", map[string]any{}, &tree)
	byName := map[string]*treeNode{}
	for _, n := range tree.Files {
		byName[n.Name] = n
	}
	if nm := byName["node_modules"]; nm == nil || nm.Type != "directory" || *nm.Loaded || nm.Children != nil {
		t.Fatalf("node_modules should be listed unopened: %+v", nm)
	}
	if src := byName["src"]; src == nil || !*src.Loaded || len(src.Children) != 2 || src.Children[0].Path != "src/app" ||
		src.Children[0].Level != 1 || src.Children[0].Children[0].Path != "src/app/main.go" {
		t.Fatalf("src subtree %+v", src)
	}
	r.ok("fs/read_dir_recursive", map[string]any{"path": ".", "maxDepth": 1}, &tree)
	for _, n := range tree.Files {
		if n.Type == "directory" && *n.Loaded {
			t.Fatalf("maxDepth 1 opened %s", n.Path)
		}
	}

	r.ok("fs/move", map[string]any{"from": "src/app/main.go", "to": "src/moved/main.go"}, nil)
	r.fails("fs/read_file", map[string]any{"path": "src/app/main.go"}, -32603, "")
	r.ok("fs/delete", map[string]any{"path": "src/moved"}, nil)
	if _, err := os.Stat(filepath.Join(a.root, "src/moved")); !os.IsNotExist(err) {
		t.Fatalf("delete left %v", err)
	}
	r.fails("fs/delete", map[string]any{"path": "/"}, -32603, "Internal error: the workspace root cannot be deleted or moved")
	r.fails("fs/delete", map[string]any{"path": "."}, -32603, "")
	r.fails("fs/move", map[string]any{"from": ".", "to": "elsewhere"}, -32603, "")

	// Traversal is clamped to the root; a symlink out of the workspace is refused.
	if err := os.WriteFile(filepath.Join(a.home, "outside.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a.home, filepath.Join(a.root, "escape")); err != nil {
		t.Fatal(err)
	}
	r.fails("fs/read_file", map[string]any{"path": "escape/outside.txt"}, -32603, "Internal error: path escapes the workspace")
	r.fails("fs/write_file", map[string]any{"path": "escape/new.txt", "content": b64("x")}, -32603, "Internal error: path escapes the workspace")
	r.fails("fs/read_file", map[string]any{"path": "../../../../" + filepath.Join(a.home, "outside.txt")}, -32603, "Internal error: no such file or directory")

	var ex execResult
	r.ok("fs/exec", map[string]any{"command": "pwd; echo err >&2; exit 3"}, &ex)
	if real, _ := filepath.EvalSymlinks(a.root); ex.ExitCode != 3 || strings.TrimSpace(ex.Stdout) != real || ex.Stderr != "err\n" {
		t.Fatalf("exec %+v", ex)
	}
	r.ok("fs/exec", map[string]any{"command": "sleep 5", "timeoutMs": 200}, &ex)
	if ex.ExitCode != -1 || !strings.Contains(ex.Stderr, "timed out") {
		t.Fatalf("timeout exec %+v", ex)
	}
	r.fails("fs/nope", map[string]any{}, -32601, "Method not found: fs/nope")
}

func TestFSReadOnly(t *testing.T) {
	a := startAgent(t)
	if err := os.WriteFile(filepath.Join(a.root, "a.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &rpcClient{t: t, c: a.dial(t, "/fs", "")}
	r.ok("fs/read_file", map[string]any{"path": "a.txt"}, nil)
	for _, m := range []string{"fs/write_file", "fs/mkdir", "fs/delete", "fs/move", "fs/exec"} {
		r.fails(m, map[string]any{"path": "a.txt", "content": b64("x"), "from": "a.txt", "to": "b.txt", "command": "true"},
			-32003, "Forbidden: read-only sandbox ticket")
	}
}

func TestFSDidChange(t *testing.T) {
	a := startAgent(t)
	r := &rpcClient{t: t, c: a.dial(t, "/fs", "write")}
	r.ok("fs/write_file", map[string]any{"path": "watched/one.txt", "content": b64("1")}, nil)
	deadline := time.Now().Add(5 * time.Second)
	var seen []changeNotice
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, data, err := r.c.Read(ctx)
		cancel()
		if err == nil {
			var rep rpcReply
			_ = json.Unmarshal(data, &rep)
			r.note = append(r.note, rep.Params)
		}
		seen = seen[:0]
		found := false
		for _, raw := range r.note {
			var n changeNotice
			_ = json.Unmarshal(raw, &n)
			seen = append(seen, n)
			for i, p := range n.Paths {
				if p == "watched/one.txt" && n.Kinds[i] != "" {
					found = true
				}
			}
		}
		if found {
			for i := 1; i < len(seen); i++ {
				if seen[i].Seq <= seen[i-1].Seq {
					t.Fatalf("seq not increasing: %+v", seen)
				}
			}
			return
		}
		_ = ctx
	}
	t.Fatalf("no fs/did_change for watched/one.txt: %+v", seen)
}

func TestTerminal(t *testing.T) {
	a := startAgent(t)
	c := a.dial(t, "/terminal", "write")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resize := make([]byte, 13)
	resize[0] = 0xFE
	binary.BigEndian.PutUint32(resize[1:5], 100)
	binary.BigEndian.PutUint32(resize[5:9], 30)
	if err := c.Write(ctx, websocket.MessageBinary, resize); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("echo size=$(stty size) cwd=$PWD\n")); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(a.root)
	want := "size=30 100 cwd=" + real
	var out bytes.Buffer
	for !strings.Contains(out.String(), want) {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("terminal output so far %q: %v", out.String(), err)
		}
		if typ != websocket.MessageBinary || len(data) > 4096 {
			t.Fatalf("frame type %v len %d", typ, len(data))
		}
		out.Write(data)
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte("exit\n")); err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("terminal end: %v", err)
			}
			return
		}
	}
}

func TestPreviewServer(t *testing.T) {
	a := startAgent(t)
	if err := os.MkdirAll(filepath.Join(a.root, "site"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.root, "site", "index file.html"), []byte("<h1>hello</h1>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a.home, filepath.Join(a.root, "out")); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(a.home, "x.txt"), []byte("secret"), 0o600)
	get := func(path string, hdr map[string]string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.PreviewAddr+path, nil)
		req.Header.Set("X-Fastgpt-Agent-Token", a.password)
		for k, v := range hdr {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/preview/site/index%20file.html", nil)
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || body != "<h1>hello</h1>" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || etag == "" {
		t.Fatalf("GET %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, body = get("/preview/site/index%20file.html", map[string]string{"Range": "bytes=4-8"}); resp.StatusCode != 206 || body != "hello" ||
		resp.Header.Get("Content-Range") != "bytes 4-8/14" {
		t.Fatalf("range %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ = get("/preview/site/index%20file.html", map[string]string{"If-None-Match": etag}); resp.StatusCode != 304 {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}
	if resp, body = get("/preview/site/index%20file.html", map[string]string{"X-Fastgpt-Preview-Method": "HEAD"}); resp.StatusCode != 200 ||
		body != "" || resp.Header.Get("Content-Length") != "14" {
		t.Fatalf("HEAD via header: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	for path, want := range map[string]int{
		"/preview/site/missing": 404, "/preview/site": 404, "/preview/site/../site/index%20file.html": 400,
		"/preview/%2E%2E/x": 400, "/preview/out/x.txt": 403, "/preview/": 400,
	} {
		if resp, _ := get(path, nil); resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if resp, _ := get("/preview/site/index%20file.html", map[string]string{"X-Fastgpt-Agent-Token": "wrong"}); resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	if resp, _ := get("/preview/site/index%20file.html", map[string]string{"X-Fastgpt-Agent-Token": ""}); resp.StatusCode != 401 {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
}
