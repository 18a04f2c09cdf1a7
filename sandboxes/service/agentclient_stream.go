package service

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// The Streamer half of AgentClient: the agent's SSE bodies are relayed as they are (it already speaks
// event:/id:/data:), its JSON answers passed through.

func (a *AgentClient) ExecStream(ctx context.Context, t sandboxes.Target, req ExecRequest) (io.ReadCloser, error) {
	b, err := json.Marshal(agentapi.ExecRequest{Cmd: req.Command, Cwd: req.Cwd, Env: req.Env, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return nil, err
	}
	return a.openSSE(ctx, t, http.MethodPost, "/v1/exec", bytes.NewReader(b))
}

func (a *AgentClient) ProcessOutput(ctx context.Context, t sandboxes.Target, pid, since string) (io.ReadCloser, error) {
	p := "/v1/processes/" + url.PathEscape(pid) + "/events"
	if since != "" {
		p += "?" + agentapi.QuerySince + "=" + url.QueryEscape(since)
	}
	return a.openSSE(ctx, t, http.MethodGet, p, nil)
}

func (a *AgentClient) openSSE(ctx context.Context, t sandboxes.Target, method, path string, body io.Reader) (io.ReadCloser, error) {
	c := a.client(t)
	req, err := c.NewRequest(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return nil, agentErr("opening the event stream", err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, Errorf(CodeShipError, "the agent did not answer with an event stream (%s)", ct)
	}
	return resp.Body, nil
}

func (a *AgentClient) Processes(ctx context.Context, t sandboxes.Target) (json.RawMessage, error) {
	list, err := a.client(t).Processes(ctx)
	if err != nil {
		return nil, agentErr("listing processes", err)
	}
	if list == nil {
		list = []agentapi.ExecResult{}
	}
	b, err := json.Marshal(map[string]any{"processes": list})
	return b, err
}

func (a *AgentClient) Signal(ctx context.Context, t sandboxes.Target, pid, signal string) error {
	return agentErr("signalling the process", a.client(t).ProcessSignal(ctx, pid, signal))
}

func (a *AgentClient) CreatePTY(ctx context.Context, t sandboxes.Target, req PTYRequest) (json.RawMessage, error) {
	s, err := a.client(t).CreatePTY(ctx, agentapi.PTYCreateRequest{Cmd: req.Command, Cwd: req.Cwd, Cols: uint16(req.Cols), Rows: uint16(req.Rows)})
	if err != nil {
		return nil, agentErr("opening a PTY", err)
	}
	return json.Marshal(s)
}

// PTYSessions lists a sandbox's PTY sessions; the agent's errors (and transport failures) are returned unwrapped,
// for a page that answers them itself.
func (a *AgentClient) PTYSessions(ctx context.Context, t sandboxes.Target) ([]agentapi.PTYSession, error) {
	return a.client(t).PTYSessions(ctx)
}

// OpenPTY starts a PTY session as the agent describes it; errors as PTYSessions.
func (a *AgentClient) OpenPTY(ctx context.Context, t sandboxes.Target, req agentapi.PTYCreateRequest) (agentapi.PTYSession, error) {
	return a.client(t).CreatePTY(ctx, req)
}
