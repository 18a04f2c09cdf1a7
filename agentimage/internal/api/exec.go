package api

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/sse"
)

// resolveDir resolves a working directory inside the workspace.
func (a *API) resolveDir(cwd string) (string, error) {
	dir, err := a.Root.Resolve(cwd)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", agentapi.Errorf(agentapi.CodeInvalidPath, "cwd %q is not a directory in the workspace", cwd).With("path", cwd)
	}
	return dir, nil
}

func (a *API) exec(w http.ResponseWriter, r *http.Request) {
	var req agentapi.ExecRequest
	if err := decode(w, r, &req); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	if req.TimeoutMS < 0 || req.YieldMS < 0 || req.MaxOutputBytes < 0 {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "timeout_ms, yield_ms and max_output_bytes must not be negative"))
		return
	}
	dir, err := a.resolveDir(req.Cwd)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	stdin, err := agentapi.DecodeData(req.Stdin, req.StdinEncoding)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	stream := wantsEvents(r)
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout == 0 && !stream && req.YieldMS == 0 {
		timeout = agentapi.DefaultExecTimeoutMS * time.Millisecond
	}
	// The process belongs to the agent, not to this request: it keeps running if the client goes away.
	p, err := a.Procs.Start(process.Spec{
		Cmd: req.Cmd, Argv: req.Argv, Dir: dir, Env: req.Env, Stdin: stdin, KeepStdin: req.KeepStdin,
		Timeout: timeout, Tag: req.Tag, PTY: req.PTY,
	})
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	if stream {
		a.follow(w, r, p, agentapi.Cursor{})
		return
	}
	var yield <-chan time.Time
	if req.YieldMS > 0 {
		t := time.NewTimer(time.Duration(req.YieldMS) * time.Millisecond)
		defer t.Stop()
		yield = t.C
	}
	select {
	case <-p.Done():
	case <-yield:
	case <-r.Context().Done():
		return
	}
	maxOut := req.MaxOutputBytes
	if maxOut == 0 {
		maxOut = agentapi.DefaultMaxOutputBytes
	}
	agentapi.WriteJSON(w, http.StatusOK, p.Result(maxOut))
}

// follow streams a process's events as SSE. Errors before the first event are JSON; after it the stream just ends
// (without an end event, which tells the client to resume).
func (a *API) follow(w http.ResponseWriter, r *http.Request, p *process.Process, from agentapi.Cursor) {
	sw := sse.NewWriter(w)
	err := p.Follow(r.Context(), from, a.Keepalive, func(ev process.Event) error {
		return sw.Send(ev.Name, ev.ID, ev.Data)
	})
	if err != nil && !sw.Started() {
		agentapi.WriteError(w, err)
	}
}

func (a *API) process(w http.ResponseWriter, r *http.Request) (*process.Process, bool) {
	p, err := a.Procs.Get(r.PathValue("id"))
	if err != nil {
		agentapi.WriteError(w, err)
		return nil, false
	}
	return p, true
}

func (a *API) listProcesses(w http.ResponseWriter, _ *http.Request) {
	list := agentapi.ProcessList{Processes: []agentapi.ExecResult{}}
	for _, p := range a.Procs.List() {
		list.Processes = append(list.Processes, p.Result(0))
	}
	agentapi.WriteJSON(w, http.StatusOK, list)
}

func (a *API) getProcess(w http.ResponseWriter, r *http.Request) {
	p, ok := a.process(w, r)
	if !ok {
		return
	}
	maxOut := agentapi.DefaultMaxOutputBytes
	if s := r.URL.Query().Get("max_output_bytes"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "max_output_bytes %q: want a non-negative integer", s))
			return
		}
		maxOut = n
	}
	agentapi.WriteJSON(w, http.StatusOK, p.Result(maxOut))
}

func (a *API) processEvents(w http.ResponseWriter, r *http.Request) {
	p, ok := a.process(w, r)
	if !ok {
		return
	}
	raw := r.URL.Query().Get(agentapi.QuerySince)
	if raw == "" {
		raw = r.Header.Get("Last-Event-ID")
	}
	from, err := agentapi.ParseCursor(raw)
	if err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "%v", err))
		return
	}
	if err := p.CheckCursor(from); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	a.follow(w, r, p, from)
}

func (a *API) processStdin(w http.ResponseWriter, r *http.Request) {
	p, ok := a.process(w, r)
	if !ok {
		return
	}
	var req agentapi.StdinRequest
	if err := decode(w, r, &req); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	data, err := agentapi.DecodeData(req.Data, req.Encoding)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	reply(w, agentapi.OK{OK: true}, p.WriteStdin(ctx, data, req.EOF))
}

func (a *API) processSignal(w http.ResponseWriter, r *http.Request) {
	p, ok := a.process(w, r)
	if !ok {
		return
	}
	var req agentapi.SignalRequest
	if err := decode(w, r, &req); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	sig, err := process.ParseSignal(req.Signal)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	reply(w, agentapi.OK{OK: true}, p.Signal(sig))
}

// killProcess kills the group and waits (briefly) for the final record.
func (a *API) killProcess(w http.ResponseWriter, r *http.Request) {
	p, ok := a.process(w, r)
	if !ok {
		return
	}
	p.Kill()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
	case <-r.Context().Done():
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, p.Result(agentapi.DefaultMaxOutputBytes))
}
