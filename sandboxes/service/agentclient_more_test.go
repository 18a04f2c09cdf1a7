package service

import (
	"context"
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
