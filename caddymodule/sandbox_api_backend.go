package caddymodule

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/routes/tickets"
	"github.com/sandgate/sandgate/sandboxes"
)

// managerBackend adapts the lifecycle Manager to the API's consumer interface.
type managerBackend struct {
	m *sandboxes.Manager
}

// CreateWorkspace, Workspace, Workspaces and DeleteWorkspace are the cargos (bayapi.Workspaces): the Manager's.
func (b managerBackend) CreateWorkspace(ctx context.Context, spec sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error) {
	return b.m.CreateWorkspace(ctx, spec)
}

func (b managerBackend) Workspace(ctx context.Context, id string) (*sandboxes.Workspace, error) {
	return b.m.Workspace(ctx, id)
}

func (b managerBackend) Workspaces(ctx context.Context, owner string) ([]*sandboxes.Workspace, error) {
	return b.m.Workspaces(ctx, owner)
}

func (b managerBackend) DeleteWorkspace(ctx context.Context, id string) error {
	return b.m.DeleteWorkspace(ctx, id)
}

func (b managerBackend) Create(ctx context.Context, req sandboxes.CreateRequest) (sandboxes.Sandbox, error) {
	sb, err := b.m.Create(ctx, req)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return *sb, nil
}

func (b managerBackend) Get(ctx context.Context, id string) (sandboxes.Sandbox, error) {
	sb, err := b.m.Get(ctx, id)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return *sb, nil
}

func (b managerBackend) List(ctx context.Context, opts sandboxes.ListOptions) ([]sandboxes.Sandbox, string, error) {
	list, next, err := b.m.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	out := make([]sandboxes.Sandbox, 0, len(list))
	for _, sb := range list {
		out = append(out, *sb)
	}
	return out, next, nil
}

func (b managerBackend) Hold(ctx context.Context, id string) (sandboxes.Target, error) {
	return b.m.Hold(ctx, id)
}

func (b managerBackend) Stop(ctx context.Context, id string) error { return b.m.Stop(ctx, id) }
func (b managerBackend) Keepalive(ctx context.Context, id string) error {
	return b.m.Keepalive(ctx, id)
}
func (b managerBackend) Delete(ctx context.Context, id string) error { return b.m.Delete(ctx, id) }
func (b managerBackend) Profiles() []sandboxes.Profile               { return b.m.Profiles() }

func (b managerBackend) ExtendTTL(ctx context.Context, id string, by time.Duration) (sandboxes.Sandbox, error) {
	sb, err := b.m.ExtendTTL(ctx, id, by)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	return *sb, nil
}

// agentBackend reaches sandbox agents with one shared connection pool: the Manager's, which its readiness and
// warm-member probes use too, so the first call after a warm claim finds an open connection (one round trip).
type agentBackend struct {
	http *http.Client
}

// newAgentBackend makes a connection pool of its own; the API uses the Manager's (agentBackend{http:
// Manager.AgentHTTPClient()}).
func newAgentBackend() *agentBackend {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // exec answers come when the command ends; requests carry their own deadlines
	}
	return &agentBackend{http: &http.Client{Transport: tr}}
}

func (a *agentBackend) client(t sandboxes.Target) *agentapi.Client {
	return agentapi.NewClientFor(t.Addr, t.Token, a.http)
}

// agentErr keeps the agent's typed errors and turns transport failures into Bay's ship_error.
func agentErr(doing string, err error) error {
	if err == nil {
		return nil
	}
	var ae *agentapi.Error
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &bayapi.Error{Code: bayapi.CodeTimeout, Message: doing + " timed out"}
	}
	return &bayapi.Error{Code: bayapi.CodeShipError, Message: fmt.Sprintf("%s: %v", doing, err)}
}

// maxExecOutput keeps Bay's "whole output" behaviour for ordinary commands while bounding memory.
const maxExecOutput = 4 << 20

func (a *agentBackend) Exec(ctx context.Context, t sandboxes.Target, req bayapi.ExecRequest) (bayapi.ExecResult, error) {
	res, err := a.client(t).Exec(ctx, agentapi.ExecRequest{
		Cmd: req.Command, Cwd: req.Cwd, Env: req.Env, TimeoutMS: req.Timeout.Milliseconds(), MaxOutputBytes: maxExecOutput,
	})
	if err != nil {
		return bayapi.ExecResult{}, agentErr("running the command", err)
	}
	stdout, err := res.StdoutBytes()
	if err != nil {
		return bayapi.ExecResult{}, agentErr("decoding stdout", err)
	}
	stderr, err := res.StderrBytes()
	if err != nil {
		return bayapi.ExecResult{}, agentErr("decoding stderr", err)
	}
	out := bayapi.ExecResult{Stdout: string(stdout), Stderr: string(stderr), TimedOut: res.Status == agentapi.StatusTimedOut,
		Truncated: res.Truncated}
	switch {
	case res.ExitCode != nil:
		out.ExitCode = *res.ExitCode
	case res.Signal != "":
		out.ExitCode = -1
	}
	return out, nil
}

func (a *agentBackend) Python(ctx context.Context, t sandboxes.Target, req bayapi.PythonRequest) (bayapi.PythonResult, error) {
	res, err := a.client(t).PythonExec(ctx, agentapi.KernelExecRequest{Code: req.Code, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return bayapi.PythonResult{}, agentErr("running python", err)
	}
	out := kernelResult(res)
	out.Images = res.Images
	if res.TimedOut && !strings.Contains(out.Error, "timed out") {
		out.Error = strings.TrimSpace(out.Error + "\nExecution timed out after " + req.Timeout.String() + " (the kernel keeps its state)")
	}
	return out, nil
}

// kernelResult is Bay's answer for a cell run by either kernel (both answer in python/exec's shape).
func kernelResult(res agentapi.KernelExecResult) bayapi.PythonResult {
	out := bayapi.PythonResult{Stdout: res.Stdout, Stderr: res.Stderr, ExecutionCount: res.ExecutionCount,
		Truncated: res.OutputTruncated}
	if res.Result != nil {
		out.Result = *res.Result
	}
	switch {
	case res.Error != nil:
		// Jupyter's (and Ship's) error text: the traceback, else "EName: value".
		out.Error = strings.Join(res.Error.Traceback, "\n")
		if out.Error == "" {
			out.Error = res.Error.EName + ": " + res.Error.EValue
		}
	case !res.Success:
		out.Error = "the cell failed"
	}
	if res.KernelRestarted {
		out.Stderr = "[kernel restarted: earlier variables are gone]\n" + out.Stderr
	}
	return out
}

// maxReadFile bounds GET filesystem/files, which answers the whole file inside JSON.
const maxReadFile = 32 << 20

func (a *agentBackend) ReadFile(ctx context.Context, t sandboxes.Target, path string) ([]byte, error) {
	d, err := a.client(t).Download(ctx, path, agentapi.DownloadOptions{})
	if err != nil {
		return nil, agentErr("reading the file", err)
	}
	defer d.Body.Close()
	b, err := io.ReadAll(io.LimitReader(d.Body, maxReadFile+1))
	if err != nil {
		return nil, agentErr("reading the file", err)
	}
	if len(b) > maxReadFile {
		return nil, &bayapi.Error{Code: bayapi.CodePayloadTooLarge, Message: fmt.Sprintf("%s is larger than %d bytes; use filesystem/download", path, maxReadFile)}
	}
	return b, nil
}

func (a *agentBackend) WriteFile(ctx context.Context, t sandboxes.Target, path string, content io.Reader) error {
	_, err := a.client(t).Upload(ctx, path, content, agentapi.UploadOptions{})
	return agentErr("writing the file", err)
}

func (a *agentBackend) ListDir(ctx context.Context, t sandboxes.Target, path string) ([]bayapi.DirEntry, error) {
	res, err := a.client(t).FSList(ctx, agentapi.ListRequest{Path: path, Depth: 1})
	if err != nil {
		return nil, agentErr("listing the directory", err)
	}
	out := make([]bayapi.DirEntry, 0, len(res.Entries))
	for _, e := range res.Entries {
		out = append(out, bayapi.DirEntry{Name: e.Name, Path: e.Path, IsFile: !e.IsDir, IsDir: e.IsDir, Size: e.Size,
			ModifiedTime: float64(e.ModTimeUnx)})
	}
	return out, nil
}

func (a *agentBackend) Remove(ctx context.Context, t sandboxes.Target, path string) error {
	return agentErr("removing", a.client(t).FSRemove(ctx, agentapi.RemoveRequest{Path: path, Recursive: true}))
}

func (a *agentBackend) Upload(ctx context.Context, t sandboxes.Target, path string, body io.Reader) (int64, error) {
	res, err := a.client(t).Upload(ctx, path, body, agentapi.UploadOptions{})
	if err != nil {
		return 0, agentErr("uploading", err)
	}
	return res.Size, nil
}

func (a *agentBackend) Download(ctx context.Context, t sandboxes.Target, path, rangeHeader string) (*bayapi.Download, error) {
	d, err := a.client(t).Download(ctx, path, agentapi.DownloadOptions{Range: rangeHeader})
	if err != nil {
		return nil, agentErr("downloading", err)
	}
	h := http.Header{}
	if d.ContentLength >= 0 {
		h.Set("Content-Length", fmt.Sprint(d.ContentLength))
	}
	if d.ContentRange != "" {
		h.Set("Content-Range", d.ContentRange)
	}
	if d.ETag != "" {
		h.Set("ETag", d.ETag)
	}
	h.Set("Accept-Ranges", "bytes")
	return &bayapi.Download{Body: d.Body, Status: d.Status, Header: h}, nil
}

// Browser maps an action onto the agent's REST helpers: POST /v1/browser/{navigate,text,evaluate,screenshot}
// (title and url come from the text helper's answer).
func (a *agentBackend) Browser(ctx context.Context, t sandboxes.Target, req bayapi.BrowserRequest) (bayapi.BrowserResult, error) {
	switch req.Action {
	case "navigate":
		res, err := a.client(t).BrowserNavigate(ctx, agentapi.BrowserNavigateRequest{URL: req.URL, TimeoutMS: req.Timeout.Milliseconds()})
		if err != nil {
			return bayapi.BrowserResult{}, agentErr("browser navigate", err)
		}
		return bayapi.BrowserResult{Value: res.URL}, nil
	case "text", "title", "url":
		res, err := a.client(t).BrowserText(ctx)
		if err != nil {
			return bayapi.BrowserResult{}, agentErr("browser text", err)
		}
		v := map[string]string{"text": res.Text, "title": res.Title, "url": res.URL}[req.Action]
		return bayapi.BrowserResult{Value: v}, nil
	case "evaluate":
		res, err := a.client(t).BrowserEvaluate(ctx, agentapi.BrowserEvaluateRequest{Expression: req.Script})
		if err != nil {
			return bayapi.BrowserResult{}, agentErr("browser evaluate", err)
		}
		return bayapi.BrowserResult{Value: string(res.Value)}, nil
	case "screenshot":
		res, err := a.client(t).BrowserScreenshot(ctx, agentapi.BrowserScreenshotRequest{})
		if err != nil {
			return bayapi.BrowserResult{}, agentErr("browser screenshot", err)
		}
		png, err := base64.StdEncoding.DecodeString(res.Data)
		if err != nil {
			return bayapi.BrowserResult{}, agentErr("decoding the screenshot", err)
		}
		return bayapi.BrowserResult{PNG: png}, nil
	}
	return bayapi.BrowserResult{}, fmt.Errorf("unknown browser action %q", req.Action)
}

// Streamer: the raw SSE bodies of the agent are relayed as they are.

func (a *agentBackend) ExecStream(ctx context.Context, t sandboxes.Target, req bayapi.ExecRequest) (io.ReadCloser, error) {
	b, err := json.Marshal(agentapi.ExecRequest{Cmd: req.Command, Cwd: req.Cwd, Env: req.Env, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return nil, err
	}
	return a.openSSE(ctx, t, http.MethodPost, "/v1/exec", bytes.NewReader(b))
}

func (a *agentBackend) ProcessOutput(ctx context.Context, t sandboxes.Target, pid, since string) (io.ReadCloser, error) {
	p := "/v1/processes/" + url.PathEscape(pid) + "/events"
	if since != "" {
		p += "?" + agentapi.QuerySince + "=" + url.QueryEscape(since)
	}
	return a.openSSE(ctx, t, http.MethodGet, p, nil)
}

func (a *agentBackend) openSSE(ctx context.Context, t sandboxes.Target, method, path string, body io.Reader) (io.ReadCloser, error) {
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
		return nil, &bayapi.Error{Code: bayapi.CodeShipError, Message: "the agent did not answer with an event stream (" + ct + ")"}
	}
	return resp.Body, nil
}

func (a *agentBackend) Processes(ctx context.Context, t sandboxes.Target) (json.RawMessage, error) {
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

func (a *agentBackend) Signal(ctx context.Context, t sandboxes.Target, pid, signal string) error {
	return agentErr("signalling the process", a.client(t).ProcessSignal(ctx, pid, signal))
}

func (a *agentBackend) CreatePTY(ctx context.Context, t sandboxes.Target, req bayapi.PTYRequest) (json.RawMessage, error) {
	s, err := a.client(t).CreatePTY(ctx, agentapi.PTYCreateRequest{Cmd: req.Command, Cwd: req.Cwd, Cols: uint16(req.Cols), Rows: uint16(req.Rows)})
	if err != nil {
		return nil, agentErr("opening a PTY", err)
	}
	return json.Marshal(s)
}

// ticketBackend mints tickets with the edge's Issuer; the URL points at the browser route of the sandbox.
type ticketBackend struct {
	issuer *tickets.Issuer
	urls   sandboxroute.URLs
}

func (b ticketBackend) Issue(_ context.Context, req bayapi.TicketRequest) (bayapi.Ticket, error) {
	perm := tickets.PermRead
	if req.Write {
		perm = tickets.PermWrite
	}
	tk, err := b.issuer.Issue(tickets.IssueRequest{SandboxID: req.SandboxID, Kind: tickets.Kind(req.Scope), Permission: perm,
		Lifetime: req.TTL, Subject: req.Owner})
	var limited *tickets.RateLimitedError
	if errors.As(err, &limited) {
		return bayapi.Ticket{}, err // bayapi answers it as rate_limited with Retry-After
	}
	if err != nil {
		return bayapi.Ticket{}, &bayapi.Error{Code: bayapi.CodeValidation, Message: err.Error()}
	}
	out := bayapi.Ticket{Ticket: tk.Token, ExpiresAt: tk.ExpiresAt}
	// Without a base for the kind's origin the answer carries the ticket only: a bare path means nothing to an
	// API client.
	if b.urls.Gateway != "" || b.urls.OnContentOrigin(tickets.Kind(req.Scope)) {
		out.URL = b.urls.Ticket(req.SandboxID, tickets.Kind(req.Scope), tk.Token)
	}
	return out, nil
}

// Edit and Grep serve bayapi.FileTools (the MCP server's edit_file and search_files).
func (a *agentBackend) Edit(ctx context.Context, t sandboxes.Target, req agentapi.EditRequest) (agentapi.EditResult, error) {
	res, err := a.client(t).FSEdit(ctx, req)
	return res, agentErr("editing a file", err)
}

func (a *agentBackend) Grep(ctx context.Context, t sandboxes.Target, req agentapi.GrepRequest) (agentapi.GrepResult, error) {
	res, err := a.client(t).FSGrep(ctx, req)
	return res, agentErr("searching files", err)
}
