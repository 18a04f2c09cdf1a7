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

// agentMux serves mux like the agent's server: a route it lacks is a typed not_found.
func agentMux(t *testing.T, mux *http.ServeMux) sandboxes.Target {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(agentapi.TokenHeader) != "tok" {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "no token"))
			return
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return sandboxes.Target{SandboxID: "sandbox-x", Addr: strings.TrimPrefix(srv.URL, "http://"), Token: "tok"}
}

// TestAgentClientKernels: Node and R answer in python's shape; an error is the traceback (else "EName: value"), a
// restarted kernel says so in stderr, and Node carries no images.
func TestAgentClientKernels(t *testing.T) {
	mux := http.NewServeMux()
	one := "1"
	mux.HandleFunc("POST /v1/node/exec", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.KernelExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.TimeoutMS != 2000 {
			t.Errorf("node timeout %d ms, want 2000", req.TimeoutMS)
		}
		agentapi.WriteJSON(w, 200, agentapi.KernelExecResult{Success: true, Stdout: "hi\n", Result: &one, ExecutionCount: 2,
			KernelRestarted: true, OutputTruncated: true})
	})
	mux.HandleFunc("POST /v1/r/exec", func(w http.ResponseWriter, r *http.Request) {
		agentapi.WriteJSON(w, 200, agentapi.KernelExecResult{Error: &agentapi.KernelError{EName: "simpleError", EValue: "boom"}})
	})
	target := agentMux(t, mux)
	a := NewAgentClient(nil)
	ctx := context.Background()

	res, err := a.Node(ctx, target, PythonRequest{Code: "1", Timeout: 2 * time.Second})
	if err != nil || res.Stdout != "hi\n" || res.Result != "1" || res.ExecutionCount != 2 || !res.Truncated ||
		!strings.HasPrefix(res.Stderr, "[kernel restarted") || res.Error != "" {
		t.Errorf("node: %+v %v", res, err)
	}
	res, err = a.R(ctx, target, PythonRequest{Code: "stop('boom')"})
	if err != nil || res.Error != "simpleError: boom" {
		t.Errorf("r error: %+v %v", res, err)
	}
}

// TestAgentClientFileTools: edit and grep pass the agent's request and answer through; the agent's typed errors
// stay typed.
func TestAgentClientFileTools(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/fs/edit", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.EditRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Old == "absent" {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeConflict, "old text not found"))
			return
		}
		agentapi.WriteJSON(w, 200, agentapi.EditResult{Path: req.Path, Replacements: 1, ETag: `"e"`})
	})
	mux.HandleFunc("POST /v1/fs/grep", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.GrepRequest
		json.NewDecoder(r.Body).Decode(&req)
		agentapi.WriteJSON(w, 200, agentapi.GrepResult{Matches: []agentapi.GrepMatch{{Path: req.Path + "/a.txt", Line: 2}}})
	})
	target := agentMux(t, mux)
	a := NewAgentClient(nil)
	ctx := context.Background()

	if res, err := a.Edit(ctx, target, agentapi.EditRequest{Path: "a.txt", Old: "x", New: "y"}); err != nil || res.Replacements != 1 || res.Path != "a.txt" {
		t.Errorf("edit: %+v %v", res, err)
	}
	_, err := a.Edit(ctx, target, agentapi.EditRequest{Path: "a.txt", Old: "absent"})
	if e := AsError(err); e.Code != CodeConflict {
		t.Errorf("edit conflict: %v -> %s", err, e.Code)
	}
	if res, err := a.Grep(ctx, target, agentapi.GrepRequest{Pattern: "x", Path: "notes"}); err != nil || len(res.Matches) != 1 || res.Matches[0].Path != "notes/a.txt" {
		t.Errorf("grep: %+v %v", res, err)
	}
}

// TestAgentClientProcesses: signals, PTY sessions and a process's event stream from a cursor.
func TestAgentClientProcesses(t *testing.T) {
	mux := http.NewServeMux()
	var signalled, since string
	mux.HandleFunc("POST /v1/processes/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.SignalRequest
		json.NewDecoder(r.Body).Decode(&req)
		signalled = r.PathValue("id") + ":" + req.Signal
		agentapi.WriteJSON(w, 200, map[string]any{})
	})
	mux.HandleFunc("GET /v1/processes/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		since = r.URL.Query().Get(agentapi.QuerySince)
		if r.PathValue("id") == "plain" {
			agentapi.WriteJSON(w, 200, map[string]any{}) // not an event stream
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: stdout\nid: 5:0\ndata: {}\n\n")
	})
	mux.HandleFunc("POST /v1/pty", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.PTYCreateRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Cols != 100 || req.Rows != 30 || req.Cwd != "sub" {
			t.Errorf("pty request %+v", req)
		}
		agentapi.WriteJSON(w, 200, agentapi.PTYSession{ID: "pty-1", Cols: req.Cols, Rows: req.Rows, Status: "running"})
	})
	target := agentMux(t, mux)
	a := NewAgentClient(nil)
	ctx := context.Background()

	if err := a.Signal(ctx, target, "p 1", "TERM"); err != nil || signalled != "p 1:TERM" {
		t.Errorf("signal: %q %v", signalled, err)
	}
	body, err := a.ProcessOutput(ctx, target, "p1", "4:0")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if since != "4:0" || !strings.Contains(string(b), "id: 5:0") {
		t.Errorf("events from 4:0: since %q, body %q", since, b)
	}
	if _, err := a.ProcessOutput(ctx, target, "plain", ""); AsError(err).Code != CodeShipError {
		t.Errorf("a JSON answer to an event stream request: %v", err)
	}
	doc, err := a.CreatePTY(ctx, target, PTYRequest{Cwd: "sub", Cols: 100, Rows: 30})
	var s agentapi.PTYSession
	if err != nil || json.Unmarshal(doc, &s) != nil || s.ID != "pty-1" {
		t.Errorf("pty: %s %v", doc, err)
	}
}

// TestAgentClientLimits: a read beyond the JSON-carried bound is payload_too_large, not memory; a call past its
// deadline is timeout; an unknown browser action is refused without a call.
func TestAgentClientLimits(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/files", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		chunk := strings.Repeat("x", 1<<20)
		for i := 0; i <= maxReadFile>>20; i++ {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mux.HandleFunc("POST /v1/exec", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	target := agentMux(t, mux)
	a := NewAgentClient(nil)

	if _, err := a.ReadFile(context.Background(), target, "big"); AsError(err).Code != CodePayloadTooLarge {
		t.Errorf("a file over %d bytes: %v", maxReadFile, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	deadline, cancelDeadline := context.WithDeadline(ctx, time.Now()) // already past: no wall-clock race
	defer cancelDeadline()
	cancel()
	_, err := a.Exec(deadline, target, ExecRequest{Command: "sleep 100"})
	if e := AsError(err); e.Code != CodeTimeout {
		t.Errorf("exec past its deadline: %v -> %s", err, e.Code)
	}
	var ae *agentapi.Error
	if _, err := a.Browser(context.Background(), target, BrowserRequest{Action: "click"}); err == nil || errors.As(err, &ae) {
		t.Errorf("unknown browser action: %v", err)
	}
}
