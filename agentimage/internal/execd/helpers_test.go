package execd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/execd"
	"github.com/sandgate/sandgate/agentimage/internal/files"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// env is the execd API over a temporary workspace and home, with the agent's real process manager.
type env struct {
	t         *testing.T
	url       string
	workspace string
	home      string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, workspace: filepath.Join(base, "workspace"), home: filepath.Join(base, "home")}
	for _, d := range []string{e.workspace, e.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root, err := workspace.New(e.workspace)
	if err != nil {
		t.Fatal(err)
	}
	root, err = root.WithAlso(e.home)
	if err != nil {
		t.Fatal(err)
	}
	procs := process.NewManager(process.Config{KillGrace: 500 * time.Millisecond})
	t.Cleanup(procs.Close)
	mux := http.NewServeMux()
	execd.Register(mux, execd.Deps{Files: files.New(root, 1<<20), Procs: procs, Home: e.home, Ping: 50 * time.Millisecond})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.url = srv.URL + agentapi.ExecdPrefix
	return e
}

// do sends a request and returns the status, the headers and the body.
func (e *env) do(method, path string, body io.Reader, header http.Header) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func (e *env) json(method, path string, v any) (int, []byte) {
	e.t.Helper()
	var body io.Reader
	if v != nil {
		b, _ := json.Marshal(v)
		body = bytes.NewReader(b)
	}
	status, _, b := e.do(method, path, body, nil)
	return status, b
}

// wantError checks an execd error answer.
func wantError(t *testing.T, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	var e agentapi.ExecdError
	if err := json.Unmarshal(body, &e); err != nil || status != wantStatus || e.Code != wantCode || e.Message == "" {
		t.Fatalf("want %d %s, got %d %s", wantStatus, wantCode, status, body)
	}
}

// run posts a command and returns its events, read the way the SDK reads them (one JSON object per line).
func (e *env) run(req agentapi.ExecdRunCommand) []agentapi.ExecdEvent {
	e.t.Helper()
	b, _ := json.Marshal(req)
	status, h, body := e.do(http.MethodPost, "/command", bytes.NewReader(b), nil)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		e.t.Fatalf("run %q: %d %s", req.Command, status, body)
	}
	if bytes.Contains(body, []byte("data:")) || !bytes.HasSuffix(body, []byte("}\n\n")) {
		e.t.Fatalf("not execd's framing: %q", body)
	}
	var out []agentapi.ExecdEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		var ev agentapi.ExecdEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("event %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

// texts are the texts of events of one type, pings left out.
func texts(evs []agentapi.ExecdEvent, typ string) []string {
	out := []string{}
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev.Text)
		}
	}
	return out
}

func last(evs []agentapi.ExecdEvent) agentapi.ExecdEvent {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != agentapi.ExecdEventPing {
			return evs[i]
		}
	}
	return agentapi.ExecdEvent{}
}

// upload posts one metadata/file pair as the SDK's writeFiles does.
func (e *env) upload(meta agentapi.ExecdFileMetadata, content string) (int, []byte) {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mb, _ := json.Marshal(meta)
	pw, _ := mw.CreateFormFile("metadata", "metadata")
	pw.Write(mb)
	fw, _ := mw.CreateFormFile("file", filepath.Base(meta.Path))
	fw.Write([]byte(content))
	mw.Close()
	status, _, b := e.do(http.MethodPost, "/files/upload", &buf, http.Header{"Content-Type": {mw.FormDataContentType()}})
	return status, b
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}
