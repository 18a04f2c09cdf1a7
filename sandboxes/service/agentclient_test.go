package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// fakeAgentServer speaks the agent's wire protocol (agentapi) for the adapter's unit tests.
func fakeAgentServer(t *testing.T) (sandboxes.Target, *http.Request) {
	t.Helper()
	var last http.Request
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/exec", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		last = *r
		if r.Header.Get("Accept") == "text/event-stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: start\nid: 0:0\ndata: {}\n\nevent: end\nid: 3:0\ndata: {\"status\":\"exited\",\"exit_code\":0}\n\n")
			return
		}
		switch req.Cmd {
		case "binary":
			agentapi.WriteJSON(w, 200, agentapi.ExecResult{Status: "exited", ExitCode: intp(3), Stdout: base64.StdEncoding.EncodeToString([]byte{0xff, 0x00}), StdoutEncoding: "base64", Stderr: "warn"})
		case "slow":
			agentapi.WriteJSON(w, 200, agentapi.ExecResult{Status: agentapi.StatusTimedOut, Signal: "SIGKILL", Stdout: "partial"})
		default:
			if req.Cwd != "sub" || req.TimeoutMS != 5000 {
				t.Errorf("exec request %+v", req)
			}
			agentapi.WriteJSON(w, 200, agentapi.ExecResult{Status: "exited", ExitCode: intp(0), Stdout: "ok\n"})
		}
	})
	mux.HandleFunc("GET /v1/files", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") == "missing" {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeFileNotFound, "no such file"))
			return
		}
		if r.Header.Get("Range") == "bytes=0-1" {
			w.Header().Set("Content-Range", "bytes 0-1/5")
			w.Header().Set("ETag", `"e1"`)
			w.WriteHeader(206)
			io.WriteString(w, "he")
			return
		}
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("PUT /v1/files", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		agentapi.WriteJSON(w, 200, agentapi.WriteResult{Path: r.URL.Query().Get("path"), Size: int64(len(b))})
	})
	mux.HandleFunc("POST /v1/fs/list", func(w http.ResponseWriter, r *http.Request) {
		agentapi.WriteJSON(w, 200, agentapi.ListResult{Entries: []agentapi.FileInfo{
			{Name: "d", Path: "d", IsDir: true, ModTimeUnx: 10}, {Name: "f", Path: "f", Size: 3, ModTimeUnx: 20}}})
	})
	mux.HandleFunc("POST /v1/fs/remove", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.RemoveRequest
		json.NewDecoder(r.Body).Decode(&req)
		if !req.Recursive {
			t.Errorf("remove must be recursive, as Ship's delete_file")
		}
		agentapi.WriteJSON(w, 200, map[string]any{})
	})
	mux.HandleFunc("POST /v1/python/exec", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.PythonExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Code == "boom" {
			agentapi.WriteJSON(w, 200, agentapi.PythonExecResult{Error: &agentapi.PythonError{EName: "ValueError", EValue: "x",
				Traceback: []string{"Traceback (most recent call last):", "ValueError: x"}}, ExecutionCount: 5})
			return
		}
		two := "2"
		agentapi.WriteJSON(w, 200, agentapi.PythonExecResult{Success: true, Stdout: "1\n", Result: &two, Images: []string{"AAA="}, ExecutionCount: 4})
	})
	mux.HandleFunc("POST /v1/browser/screenshot", func(w http.ResponseWriter, r *http.Request) {
		agentapi.WriteJSON(w, 200, agentapi.BrowserScreenshotResult{Data: base64.StdEncoding.EncodeToString([]byte("PNG")), Format: "png"})
	})
	mux.HandleFunc("POST /v1/browser/text", func(w http.ResponseWriter, r *http.Request) {
		agentapi.WriteJSON(w, 200, agentapi.BrowserTextResult{URL: "https://example.com/", Title: "Example", Text: "Hello"})
	})
	mux.HandleFunc("GET /v1/processes", func(w http.ResponseWriter, r *http.Request) {
		agentapi.WriteJSON(w, 200, agentapi.ProcessList{Processes: []agentapi.ExecResult{{ID: "p1", Status: "running"}}})
	})
	// Like the agent's server: a route it lacks is a typed not_found.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return sandboxes.Target{SandboxID: "sandbox-x", Addr: strings.TrimPrefix(srv.URL, "http://"), Token: "tok"}, &last
}

func intp(i int) *int { return &i }

func TestAgentClient(t *testing.T) {
	target, _ := fakeAgentServer(t)
	a := NewAgentClient(nil)
	ctx := context.Background()

	res, err := a.Exec(ctx, target, ExecRequest{Command: "ls", Cwd: "sub", Timeout: 5 * time.Second})
	if err != nil || res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Errorf("exec: %+v %v", res, err)
	}
	res, _ = a.Exec(ctx, target, ExecRequest{Command: "binary"})
	if res.ExitCode != 3 || res.Stdout != "\xff\x00" || res.Stderr != "warn" {
		t.Errorf("binary exec: %+v", res)
	}
	res, _ = a.Exec(ctx, target, ExecRequest{Command: "slow"})
	if !res.TimedOut || res.ExitCode != -1 || res.Stdout != "partial" {
		t.Errorf("timed out exec: %+v", res)
	}
	if b, err := a.ReadFile(ctx, target, "a"); err != nil || string(b) != "hello" {
		t.Errorf("read: %q %v", b, err)
	}
	var ae *agentapi.Error
	if _, err := a.ReadFile(ctx, target, "missing"); !errors.As(err, &ae) || ae.Code != agentapi.CodeFileNotFound {
		t.Errorf("missing file: %v", err)
	}
	d, err := a.Download(ctx, target, "a", "bytes=0-1")
	if err != nil || d.Status != 206 || d.Header.Get("Content-Range") != "bytes 0-1/5" || d.Header.Get("ETag") != `"e1"` {
		t.Fatalf("range download: %+v %v", d, err)
	}
	d.Body.Close()
	if n, err := a.Upload(ctx, target, "up", strings.NewReader("12345")); err != nil || n != 5 {
		t.Errorf("upload: %d %v", n, err)
	}
	list, err := a.ListDir(ctx, target, ".")
	if err != nil || len(list) != 2 || !list[0].IsDir || list[0].IsFile || !list[1].IsFile || list[1].ModifiedTime != 20 {
		t.Errorf("list: %+v %v", list, err)
	}
	if err := a.Remove(ctx, target, "d"); err != nil {
		t.Errorf("remove: %v", err)
	}
	py, err := a.Python(ctx, target, PythonRequest{Code: "1", Timeout: time.Second})
	if err != nil || py.Stdout != "1\n" || py.Result != "2" || len(py.Images) != 1 || py.ExecutionCount != 4 {
		t.Errorf("python: %+v %v", py, err)
	}
	shot, err := a.Browser(ctx, target, BrowserRequest{Action: "screenshot"})
	if err != nil || string(shot.PNG) != "PNG" {
		t.Errorf("screenshot: %+v %v", shot, err)
	}
	if py, _ := a.Python(ctx, target, PythonRequest{Code: "boom"}); !strings.Contains(py.Error, "ValueError: x") {
		t.Errorf("python error: %+v", py)
	}
	for action, want := range map[string]string{"title": "Example", "url": "https://example.com/", "text": "Hello"} {
		if res, err := a.Browser(ctx, target, BrowserRequest{Action: action}); err != nil || res.Value != want {
			t.Errorf("browser %s: %+v %v", action, res, err)
		}
	}
	// A route the agent lacks is the agent's typed not_found, which the API reports as ship_error.
	if _, err := a.Browser(ctx, target, BrowserRequest{Action: "evaluate"}); !errors.As(err, &ae) || ae.Code != agentapi.CodeNotFound {
		t.Errorf("missing route: %v", err)
	}
	stream, err := a.ExecStream(ctx, target, ExecRequest{Command: "x"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(stream)
	stream.Close()
	if !strings.Contains(string(body), "event: end") {
		t.Errorf("stream: %q", body)
	}
	procs, err := a.Processes(ctx, target)
	if err != nil || !strings.Contains(string(procs), `"p1"`) {
		t.Errorf("processes: %s %v", procs, err)
	}
	// An unreachable agent is ship_error.
	_, err = a.Exec(ctx, sandboxes.Target{Addr: "127.0.0.1:1", Token: "x"}, ExecRequest{Command: "true"})
	var be *Error
	if !errors.As(err, &be) || be.Code != CodeShipError {
		t.Errorf("unreachable agent: %v", err)
	}
}
