package service

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// AgentClient is the Agent (and Streamer, NodeAgent, RAgent, FileTools) of real sandboxes: it speaks agentapi to
// the agent a Target names. The API shares the Manager's connection pool, which its readiness and warm-member
// probes use too, so the first call after a warm claim finds an open connection (one round trip).
type AgentClient struct {
	http *http.Client
}

// NewAgentClient reaches agents through c (the Manager's AgentHTTPClient); nil makes a connection pool of its own.
func NewAgentClient(c *http.Client) *AgentClient {
	if c != nil {
		return &AgentClient{http: c}
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // exec answers come when the command ends; requests carry their own deadlines
	}
	return &AgentClient{http: &http.Client{Transport: tr, CheckRedirect: agentapi.NoRedirect}}
}

// HTTPClient is the connection pool the client uses.
func (a *AgentClient) HTTPClient() *http.Client { return a.http }

func (a *AgentClient) client(t sandboxes.Target) *agentapi.Client {
	return agentapi.NewClientFor(t.Addr, t.Token, a.http)
}

// maxExecOutput keeps Bay's "whole output" behaviour for ordinary commands while bounding memory.
const maxExecOutput = 4 << 20

func (a *AgentClient) Exec(ctx context.Context, t sandboxes.Target, req ExecRequest) (ExecResult, error) {
	res, err := a.client(t).Exec(ctx, agentapi.ExecRequest{
		Cmd: req.Command, Cwd: req.Cwd, Env: req.Env, TimeoutMS: req.Timeout.Milliseconds(), MaxOutputBytes: maxExecOutput,
	})
	if err != nil {
		return ExecResult{}, agentErr("running the command", err)
	}
	stdout, err := res.StdoutBytes()
	if err != nil {
		return ExecResult{}, agentErr("decoding stdout", err)
	}
	stderr, err := res.StderrBytes()
	if err != nil {
		return ExecResult{}, agentErr("decoding stderr", err)
	}
	out := ExecResult{Stdout: string(stdout), Stderr: string(stderr), TimedOut: res.Status == agentapi.StatusTimedOut,
		Truncated: res.Truncated}
	switch {
	case res.ExitCode != nil:
		out.ExitCode = *res.ExitCode
	case res.Signal != "":
		out.ExitCode = -1
	}
	return out, nil
}

func (a *AgentClient) Python(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error) {
	res, err := a.client(t).PythonExec(ctx, agentapi.KernelExecRequest{Code: req.Code, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return PythonResult{}, agentErr("running python", err)
	}
	out := kernelResult(res)
	out.Images = res.Images
	if res.TimedOut && !strings.Contains(out.Error, "timed out") {
		out.Error = strings.TrimSpace(out.Error + "\nExecution timed out after " + req.Timeout.String() + " (the kernel keeps its state)")
	}
	return out, nil
}

// kernelResult is Bay's answer for a cell run by either kernel (both answer in python/exec's shape).
func kernelResult(res agentapi.KernelExecResult) PythonResult {
	out := PythonResult{Stdout: res.Stdout, Stderr: res.Stderr, ExecutionCount: res.ExecutionCount,
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

func (a *AgentClient) ReadFile(ctx context.Context, t sandboxes.Target, path string) ([]byte, error) {
	// The whole file is read into memory here, not streamed to the caller: bounded in time as well as size.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, agentapi.DefaultCallTimeout)
		defer cancel()
	}
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
		return nil, Errorf(CodePayloadTooLarge, "%s is larger than %d bytes; use filesystem/download", path, maxReadFile)
	}
	return b, nil
}

func (a *AgentClient) WriteFile(ctx context.Context, t sandboxes.Target, path string, content io.Reader) error {
	_, err := a.client(t).Upload(ctx, path, content, agentapi.UploadOptions{})
	return agentErr("writing the file", err)
}

func (a *AgentClient) ListDir(ctx context.Context, t sandboxes.Target, path string) ([]DirEntry, error) {
	res, err := a.client(t).FSList(ctx, agentapi.ListRequest{Path: path, Depth: 1})
	if err != nil {
		return nil, agentErr("listing the directory", err)
	}
	out := make([]DirEntry, 0, len(res.Entries))
	for _, e := range res.Entries {
		out = append(out, DirEntry{Name: e.Name, Path: e.Path, IsFile: !e.IsDir, IsDir: e.IsDir, Size: e.Size,
			ModifiedTime: float64(e.ModTimeUnx)})
	}
	return out, nil
}

func (a *AgentClient) Remove(ctx context.Context, t sandboxes.Target, path string) error {
	return agentErr("removing", a.client(t).FSRemove(ctx, agentapi.RemoveRequest{Path: path, Recursive: true}))
}

func (a *AgentClient) Upload(ctx context.Context, t sandboxes.Target, path string, body io.Reader) (int64, error) {
	res, err := a.client(t).Upload(ctx, path, body, agentapi.UploadOptions{})
	if err != nil {
		return 0, agentErr("uploading", err)
	}
	return res.Size, nil
}

func (a *AgentClient) Download(ctx context.Context, t sandboxes.Target, path, rangeHeader string) (*Download, error) {
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
	return &Download{Body: d.Body, Status: d.Status, Header: h}, nil
}

// Browser maps an action onto the agent's REST helpers: POST /v1/browser/{navigate,text,evaluate,screenshot}
// (title and url come from the text helper's answer).
func (a *AgentClient) Browser(ctx context.Context, t sandboxes.Target, req BrowserRequest) (BrowserResult, error) {
	switch req.Action {
	case "navigate":
		res, err := a.client(t).BrowserNavigate(ctx, agentapi.BrowserNavigateRequest{URL: req.URL, TimeoutMS: req.Timeout.Milliseconds()})
		if err != nil {
			return BrowserResult{}, agentErr("browser navigate", err)
		}
		return BrowserResult{Value: res.URL}, nil
	case "text", "title", "url":
		res, err := a.client(t).BrowserText(ctx)
		if err != nil {
			return BrowserResult{}, agentErr("browser text", err)
		}
		v := map[string]string{"text": res.Text, "title": res.Title, "url": res.URL}[req.Action]
		return BrowserResult{Value: v}, nil
	case "evaluate":
		res, err := a.client(t).BrowserEvaluate(ctx, agentapi.BrowserEvaluateRequest{Expression: req.Script})
		if err != nil {
			return BrowserResult{}, agentErr("browser evaluate", err)
		}
		return BrowserResult{Value: string(res.Value)}, nil
	case "screenshot":
		res, err := a.client(t).BrowserScreenshot(ctx, agentapi.BrowserScreenshotRequest{})
		if err != nil {
			return BrowserResult{}, agentErr("browser screenshot", err)
		}
		png, err := base64.StdEncoding.DecodeString(res.Data)
		if err != nil {
			return BrowserResult{}, agentErr("decoding the screenshot", err)
		}
		return BrowserResult{PNG: png}, nil
	}
	return BrowserResult{}, fmt.Errorf("unknown browser action %q", req.Action)
}

// Node runs code in the sandbox's Node.js kernel; the agent answers in python/exec's shape.
func (a *AgentClient) Node(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error) {
	res, err := a.client(t).NodeExec(ctx, agentapi.KernelExecRequest{Code: req.Code, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return PythonResult{}, agentErr("running node", err)
	}
	return kernelResult(res), nil
}

var _ NodeAgent = (*AgentClient)(nil)

// R runs code in the sandbox's R session; the agent answers in python/exec's shape.
func (a *AgentClient) R(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error) {
	res, err := a.client(t).RExec(ctx, agentapi.KernelExecRequest{Code: req.Code, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return PythonResult{}, agentErr("running R", err)
	}
	return kernelResult(res), nil
}

var _ RAgent = (*AgentClient)(nil)

// Edit and Grep serve FileTools (the MCP server's edit_file and search_files).
func (a *AgentClient) Edit(ctx context.Context, t sandboxes.Target, req agentapi.EditRequest) (agentapi.EditResult, error) {
	res, err := a.client(t).FSEdit(ctx, req)
	return res, agentErr("editing a file", err)
}

func (a *AgentClient) Grep(ctx context.Context, t sandboxes.Target, req agentapi.GrepRequest) (agentapi.GrepResult, error) {
	res, err := a.client(t).FSGrep(ctx, req)
	return res, agentErr("searching files", err)
}

var (
	_ Agent     = (*AgentClient)(nil)
	_ Streamer  = (*AgentClient)(nil)
	_ NodeAgent = (*AgentClient)(nil)
	_ RAgent    = (*AgentClient)(nil)
	_ FileTools = (*AgentClient)(nil)
)
