// Package client is a Go client for sandgate's REST API (the Bay-compatible /v1 surface), used by tests and
// benchmarks and usable by programs. It mirrors what Shipyard Neo's Python SDK sends.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one gateway with one API key.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

// New returns a client for baseURL ("http://127.0.0.1:8114").
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey, HTTP: &http.Client{Timeout: 5 * time.Minute}}
}

// Error is an API error: Bay's envelope, or FastAPI's 422 detail list.
type Error struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	Details   map[string]any
	// Detail is the 422 body's detail list.
	Detail []map[string]any
}

func (e *Error) Error() string {
	if e.Code == "" && len(e.Detail) > 0 {
		return fmt.Sprintf("%d validation error: %v", e.Status, e.Detail)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Sandbox is Bay's SandboxResponse.
type Sandbox struct {
	ID            string           `json:"id"`
	Status        string           `json:"status"`
	Profile       string           `json:"profile"`
	CargoID       *string          `json:"cargo_id"`
	Capabilities  []string         `json:"capabilities"`
	CreatedAt     time.Time        `json:"created_at"`
	ExpiresAt     *time.Time       `json:"expires_at"`
	IdleExpiresAt *time.Time       `json:"idle_expires_at"`
	Containers    []map[string]any `json:"containers"`
	// LastError is sandgate's addition: why the last start failed, or why its container died.
	LastError *string `json:"last_error"`
}

// ShellResult is shell/exec's answer.
type ShellResult struct {
	Success         bool    `json:"success"`
	Output          string  `json:"output"`
	Error           *string `json:"error"`
	ExitCode        int     `json:"exit_code"`
	ExecutionID     string  `json:"execution_id"`
	ExecutionTimeMS int64   `json:"execution_time_ms"`
	Command         *string `json:"command"`
}

// PythonResult is python/exec's answer.
type PythonResult struct {
	Success bool    `json:"success"`
	Output  string  `json:"output"`
	Error   *string `json:"error"`
	Data    struct {
		ExecutionCount int `json:"execution_count"`
		Output         struct {
			Text   string              `json:"text"`
			Images []map[string]string `json:"images"`
		} `json:"output"`
	} `json:"data"`
	ExecutionID     string  `json:"execution_id"`
	ExecutionTimeMS int64   `json:"execution_time_ms"`
	Code            *string `json:"code"`
}

// FileInfo is one directory entry.
type FileInfo struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	IsFile       bool    `json:"is_file"`
	IsDir        bool    `json:"is_dir"`
	Size         int64   `json:"size"`
	ModifiedTime float64 `json:"modified_time"`
}

// HistoryEntry is one execution record.
type HistoryEntry struct {
	ID              string    `json:"id"`
	ExecType        string    `json:"exec_type"`
	Code            string    `json:"code"`
	Success         bool      `json:"success"`
	ExecutionTimeMS int64     `json:"execution_time_ms"`
	Output          *string   `json:"output"`
	Error           *string   `json:"error"`
	PayloadRef      *string   `json:"payload_ref"`
	Description     *string   `json:"description"`
	Tags            *string   `json:"tags"`
	Notes           *string   `json:"notes"`
	CreatedAt       time.Time `json:"created_at"`
}

// Do sends a JSON request (body nil for none) and decodes a JSON answer into out (nil to discard). Non-2xx
// answers become *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any, header ...string) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decode(resp, out)
}

func (c *Client) send(req *http.Request) (*http.Response, error) {
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	return resp, nil
}

func decode(resp *http.Response, out any) error {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		return parseError(resp.StatusCode, b)
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding the answer: %w", err)
	}
	return nil
}

func parseError(status int, b []byte) *Error {
	e := &Error{Status: status}
	var env struct {
		Error *struct {
			Code      string         `json:"code"`
			Message   string         `json:"message"`
			RequestID string         `json:"request_id"`
			Details   map[string]any `json:"details"`
		} `json:"error"`
		Detail []map[string]any `json:"detail"`
	}
	if json.Unmarshal(b, &env) == nil {
		if env.Error != nil {
			e.Code, e.Message, e.RequestID, e.Details = env.Error.Code, env.Error.Message, env.Error.RequestID, env.Error.Details
			return e
		}
		e.Detail = env.Detail
		return e
	}
	e.Message = string(b)
	return e
}

// Health is GET /health.
func (c *Client) Health(ctx context.Context) (status, version string, err error) {
	var out struct{ Status, Version string }
	err = c.Do(ctx, "GET", "/health", nil, &out)
	return out.Status, out.Version, err
}

// Profile is one item of GET /v1/profiles.
type Profile struct {
	ID           string   `json:"id"`
	Image        string   `json:"image"`
	Capabilities []string `json:"capabilities"`
	IdleTimeout  int      `json:"idle_timeout"`
}

// Profiles lists the profiles.
func (c *Client) Profiles(ctx context.Context) ([]Profile, error) {
	var out struct{ Items []Profile }
	err := c.Do(ctx, "GET", "/v1/profiles", nil, &out)
	return out.Items, err
}

// CreateSandbox creates a sandbox; ttl 0 means it never expires.
func (c *Client) CreateSandbox(ctx context.Context, profile string, ttl int) (*Sandbox, error) {
	var out Sandbox
	err := c.Do(ctx, "POST", "/v1/sandboxes", map[string]any{"profile": profile, "ttl": ttl}, &out)
	return &out, err
}

// GetSandbox reads one sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	var out Sandbox
	err := c.Do(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(id), nil, &out)
	return &out, err
}

// WaitReady polls like AstrBot does (every interval) until ready; failed or expired is an error.
func (c *Client) WaitReady(ctx context.Context, id string, interval time.Duration) (*Sandbox, error) {
	for {
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			return nil, err
		}
		switch sb.Status {
		case "ready":
			return sb, nil
		case "failed", "expired":
			if sb.LastError != nil && *sb.LastError != "" {
				return sb, fmt.Errorf("sandbox %s is %s: %s", id, sb.Status, *sb.LastError)
			}
			return sb, fmt.Errorf("sandbox %s is %s", id, sb.Status)
		}
		select {
		case <-ctx.Done():
			return sb, fmt.Errorf("waiting for sandbox %s (last status %s): %w", id, sb.Status, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// DeleteSandbox deletes a sandbox (204, idempotent).
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.Do(ctx, "DELETE", "/v1/sandboxes/"+url.PathEscape(id), nil, nil)
}

// Shell runs shell/exec.
func (c *Client) Shell(ctx context.Context, id, command string, timeout int) (*ShellResult, error) {
	var out ShellResult
	err := c.Do(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/shell/exec",
		map[string]any{"command": command, "timeout": timeout, "include_code": false}, &out)
	return &out, err
}

// Python runs python/exec.
func (c *Client) Python(ctx context.Context, id, code string, timeout int) (*PythonResult, error) {
	var out PythonResult
	err := c.Do(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/python/exec",
		map[string]any{"code": code, "timeout": timeout, "include_code": false}, &out)
	return &out, err
}

// ReadFile is GET filesystem/files.
func (c *Client) ReadFile(ctx context.Context, id, path string) (string, error) {
	var out struct{ Content string }
	err := c.Do(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/filesystem/files?path="+url.QueryEscape(path), nil, &out)
	return out.Content, err
}

// WriteFile is PUT filesystem/files.
func (c *Client) WriteFile(ctx context.Context, id, path, content string) error {
	return c.Do(ctx, "PUT", "/v1/sandboxes/"+url.PathEscape(id)+"/filesystem/files", map[string]string{"path": path, "content": content}, nil)
}

// DeleteFile is DELETE filesystem/files.
func (c *Client) DeleteFile(ctx context.Context, id, path string) error {
	return c.Do(ctx, "DELETE", "/v1/sandboxes/"+url.PathEscape(id)+"/filesystem/files?path="+url.QueryEscape(path), nil, nil)
}

// ListDir is GET filesystem/directories.
func (c *Client) ListDir(ctx context.Context, id, path string) ([]FileInfo, error) {
	var out struct{ Entries []FileInfo }
	err := c.Do(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/filesystem/directories?path="+url.QueryEscape(path), nil, &out)
	return out.Entries, err
}

// Upload sends content as the multipart `file` part (filename "upload", as the SDK does) with the `path` field
// first, streaming from r.
func (c *Client) Upload(ctx context.Context, id, path string, r io.Reader) (int64, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("path", path)
		if err == nil {
			var fw io.Writer
			if fw, err = mw.CreateFormFile("file", "upload"); err == nil {
				if _, err = io.Copy(fw, r); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, "POST", c.BaseURL+"/v1/sandboxes/"+url.PathEscape(id)+"/filesystem/upload", pr)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.send(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Size int64 `json:"size"`
	}
	err = decode(resp, &out)
	return out.Size, err
}

// Download opens a file; rangeHeader ("bytes=0-9") may be empty. The caller closes the body.
func (c *Client) Download(ctx context.Context, id, path, rangeHeader string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.BaseURL+"/v1/sandboxes/"+url.PathEscape(id)+"/filesystem/download?path="+url.QueryEscape(path), nil)
	if err != nil {
		return nil, err
	}
	if rangeHeader != "" {
		req.Header.Set("Range", rangeHeader)
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decode(resp, nil)
	}
	return resp, nil
}

// History lists execution history.
func (c *Client) History(ctx context.Context, id string, query url.Values) ([]HistoryEntry, int, error) {
	var out struct {
		Entries []HistoryEntry `json:"entries"`
		Total   int            `json:"total"`
	}
	p := "/v1/sandboxes/" + url.PathEscape(id) + "/history"
	if len(query) > 0 {
		p += "?" + query.Encode()
	}
	err := c.Do(ctx, "GET", p, nil, &out)
	return out.Entries, out.Total, err
}
