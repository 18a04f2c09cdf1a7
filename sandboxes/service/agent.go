package service

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// ExecRequest runs a shell command in the sandbox.
type ExecRequest struct {
	Command string
	// Cwd is relative to the workspace root; "" is the root.
	Cwd     string
	Env     map[string]string
	Timeout time.Duration
}

// ExecResult is a finished command.
type ExecResult struct {
	ExitCode int
	Stdout   string
	Stderr   string
	// TimedOut is set when the command was killed at its timeout.
	TimedOut bool
	// Truncated is set when the output was cut (the agent's ring, or the gateway's bound on agent replies).
	Truncated bool
}

// PythonRequest runs code in the sandbox's persistent Python kernel.
type PythonRequest struct {
	Code    string
	Timeout time.Duration
}

// PythonResult is what the kernel produced. Images are base64 PNGs.
type PythonResult struct {
	Stdout         string
	Stderr         string
	Result         string
	Error          string
	Images         []string
	ExecutionCount int
	// Truncated is set when the output was cut (the kernel's cap, or the gateway's bound on agent replies).
	Truncated bool
}

// DirEntry is one item of a directory listing, Ship's shape.
type DirEntry struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	IsFile       bool    `json:"is_file"`
	IsDir        bool    `json:"is_dir"`
	Size         int64   `json:"size"`
	ModifiedTime float64 `json:"modified_time"`
}

// Download is an open file body from the agent.
type Download struct {
	Body io.ReadCloser
	// Status is 200 or 206 (a Range was served).
	Status int
	// Header carries Content-Length, Content-Range, ETag, Last-Modified, Accept-Ranges.
	Header http.Header
}

// BrowserRequest is one browser action on the sandbox's Chromium.
type BrowserRequest struct {
	Action  string // navigate, screenshot, evaluate, text, title, url
	URL     string
	Script  string
	Timeout time.Duration
}

// BrowserResult is the outcome of a BrowserRequest.
type BrowserResult struct {
	// Value is the text, title, URL or JSON-encoded evaluation result.
	Value string
	// PNG is a screenshot.
	PNG []byte
}

// Agent is what the operations need of the in-sandbox agent, addressed by a Target from Hold. Paths are relative
// to the workspace root and already validated.
type Agent interface {
	Exec(ctx context.Context, t sandboxes.Target, req ExecRequest) (ExecResult, error)
	Python(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)
	ReadFile(ctx context.Context, t sandboxes.Target, path string) ([]byte, error)
	WriteFile(ctx context.Context, t sandboxes.Target, path string, content io.Reader) error
	ListDir(ctx context.Context, t sandboxes.Target, path string) ([]DirEntry, error)
	Remove(ctx context.Context, t sandboxes.Target, path string) error
	// Upload streams body to path and returns the bytes written.
	Upload(ctx context.Context, t sandboxes.Target, path string, body io.Reader) (int64, error)
	// Download opens path; rangeHeader is passed through ("" for the whole file).
	Download(ctx context.Context, t sandboxes.Target, path, rangeHeader string) (*Download, error)
	Browser(ctx context.Context, t sandboxes.Target, req BrowserRequest) (BrowserResult, error)
}

// Streamer is the agent's extra surface for our additions: streaming exec, processes and PTY sessions. Streams are
// relayed byte for byte (the agent already speaks SSE with event:/id:/data:); JSON answers are passed through.
type Streamer interface {
	// ExecStream starts a command and returns its SSE stream.
	ExecStream(ctx context.Context, t sandboxes.Target, req ExecRequest) (io.ReadCloser, error)
	// Processes lists the sandbox's processes as the agent reports them (a JSON document).
	Processes(ctx context.Context, t sandboxes.Target) (json.RawMessage, error)
	// ProcessOutput resumes a process's events as SSE from a cursor ("" is the start; an event id resumes after it).
	ProcessOutput(ctx context.Context, t sandboxes.Target, pid, since string) (io.ReadCloser, error)
	// Signal sends a signal (TERM, KILL, INT, HUP...) to a process's group.
	Signal(ctx context.Context, t sandboxes.Target, pid, signal string) error
	// CreatePTY opens a PTY session and returns the agent's description of it (a JSON document with its id).
	CreatePTY(ctx context.Context, t sandboxes.Target, req PTYRequest) (json.RawMessage, error)
}

// PTYRequest opens a terminal.
type PTYRequest struct {
	Command string `json:"command,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Cols    int    `json:"cols,omitempty"`
	Rows    int    `json:"rows,omitempty"`
}

// NodeAgent runs code in the sandbox's persistent Node.js kernel (the request and answer shapes are python's).
type NodeAgent interface {
	Node(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)
}

// RAgent runs code in the sandbox's persistent R kernel (the request and answer shapes are python's).
type RAgent interface {
	R(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)
}

// FileTools edits and searches workspace files in place (the MCP server's edit_file and search_files).
type FileTools interface {
	Edit(ctx context.Context, t sandboxes.Target, req agentapi.EditRequest) (agentapi.EditResult, error)
	Grep(ctx context.Context, t sandboxes.Target, req agentapi.GrepRequest) (agentapi.GrepResult, error)
}
