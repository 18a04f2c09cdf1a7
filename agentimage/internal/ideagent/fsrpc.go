package ideagent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// JSON-RPC error codes of the IDE agent.
const (
	codeInvalidParams  = -32602
	codeMethodNotFound = -32601
	codeInternal       = -32603
	codeConflict       = -32001
	codeReadOnly       = -32003
)

const (
	msgReadOnly        = "Forbidden: read-only sandbox ticket"
	msgConflict        = "Data Conflict: The file has been modified elsewhere."
	defaultExecTimeout = 30 * time.Second
	maxExecTimeout     = 10 * time.Minute
	maxExecOutput      = 1 << 20
	maxRecursiveDepth  = 50
	defaultRecursive   = 20
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcNotification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// fsSession is one /fs connection: requests are handled one at a time, in order; change notifications are written
// between them.
type fsSession struct {
	a        *Agent
	conn     *websocket.Conn
	writable bool
}

func (s *fsSession) serve(ctx context.Context) {
	changes, unsubscribe := s.a.watcher.subscribe()
	defer unsubscribe()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case n, ok := <-changes:
				if !ok {
					return
				}
				if err := s.write(ctx, rpcNotification{JSONRPC: "2.0", Method: "fs/did_change", Params: n}); err != nil {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		typ, data, err := s.conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary && !utf8.Valid(data) {
			continue
		}
		var req rpcRequest
		if err := json.Unmarshal(data, &req); err != nil || req.Method == "" {
			continue // unparsable frames are skipped, as the original does
		}
		result, rerr := s.dispatch(ctx, req.Method, req.Params)
		if len(req.ID) == 0 || bytes.Equal(req.ID, []byte("null")) {
			continue // a notification gets no answer
		}
		resp := rpcResponse{JSONRPC: "2.0", ID: req.ID}
		if rerr != nil {
			resp.Error = rerr
		} else {
			resp.Result = result
		}
		if err := s.write(ctx, resp); err != nil {
			return
		}
	}
}

func (s *fsSession) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFramed(ctx, s.conn, websocket.MessageText, b, s.a.cfg.MaxFrameBytes)
}

// writeFramed writes one message split into frames of at most maxFrame bytes.
func writeFramed(ctx context.Context, c *websocket.Conn, typ websocket.MessageType, b []byte, maxFrame int64) error {
	if int64(len(b)) <= maxFrame {
		return c.Write(ctx, typ, b)
	}
	w, err := c.Writer(ctx, typ)
	if err != nil {
		return err
	}
	for len(b) > 0 {
		n := int(min(maxFrame, int64(len(b))))
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return w.Close()
}

var writeMethods = map[string]bool{"fs/write_file": true, "fs/mkdir": true, "fs/delete": true, "fs/move": true, "fs/exec": true}

func (s *fsSession) dispatch(ctx context.Context, method string, raw json.RawMessage) (any, *rpcError) {
	if writeMethods[method] && !s.writable {
		return nil, &rpcError{Code: codeReadOnly, Message: msgReadOnly}
	}
	ws := s.a.ws
	var p struct {
		Path         *string  `json:"path"`
		MaxDepth     *int     `json:"maxDepth"`
		ExcludeNames []string `json:"excludeNames"`
		Content      *string  `json:"content"`
		OldEtag      *string  `json:"old_etag"`
		From         *string  `json:"from"`
		To           *string  `json:"to"`
		Command      *string  `json:"command"`
		TimeoutMs    *int64   `json:"timeoutMs"`
	}
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: " + err.Error()}
		}
	}
	needPath := func() (string, *rpcError) {
		if p.Path == nil {
			return "", &rpcError{Code: codeInvalidParams, Message: "Invalid params: path is required"}
		}
		return *p.Path, nil
	}
	switch method {
	case "fs/read_dir":
		path, perr := needPath()
		if perr != nil {
			return nil, perr
		}
		return wrap(ws.readDir(path))
	case "fs/read_dir_recursive":
		path := "."
		if p.Path != nil {
			path = *p.Path
		}
		depth := defaultRecursive
		if p.MaxDepth != nil {
			depth = min(max(*p.MaxDepth, 1), maxRecursiveDepth)
		}
		exclude := p.ExcludeNames
		if exclude == nil {
			exclude = defaultExcludeNames
		}
		return wrap(ws.readDirRecursive(path, depth, exclude))
	case "fs/read_file":
		path, perr := needPath()
		if perr != nil {
			return nil, perr
		}
		fc, err := ws.readFile(path, s.a.cfg.MaxFileBytes)
		if err != nil {
			return nil, toRPCError(err)
		}
		return map[string]any{"content": base64.StdEncoding.EncodeToString(fc.Data), "mtime": fc.Mtime, "etag": fc.Etag}, nil
	case "fs/write_file":
		path, perr := needPath()
		if perr != nil {
			return nil, perr
		}
		if p.Content == nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: content is required"}
		}
		data, err := base64.StdEncoding.DecodeString(*p.Content)
		if err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: content is not base64"}
		}
		return wrap(ws.writeFile(path, data, p.OldEtag, s.a.cfg.MaxFileBytes))
	case "fs/mkdir":
		path, perr := needPath()
		if perr != nil {
			return nil, perr
		}
		return success(ws.mkdir(path))
	case "fs/delete":
		path, perr := needPath()
		if perr != nil {
			return nil, perr
		}
		return success(ws.remove(path))
	case "fs/move":
		if p.From == nil || p.To == nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: from and to are required"}
		}
		return success(ws.move(*p.From, *p.To))
	case "fs/exec":
		if p.Command == nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: command is required"}
		}
		timeout := defaultExecTimeout
		if p.TimeoutMs != nil && *p.TimeoutMs > 0 {
			timeout = min(time.Duration(*p.TimeoutMs)*time.Millisecond, maxExecTimeout)
		}
		return s.a.exec(ctx, *p.Command, timeout), nil
	}
	return nil, &rpcError{Code: codeMethodNotFound, Message: "Method not found: " + method}
}

func wrap[T any](v T, err error) (any, *rpcError) {
	if err != nil {
		return nil, toRPCError(err)
	}
	return v, nil
}

func success(err error) (any, *rpcError) {
	if err != nil {
		return nil, toRPCError(err)
	}
	return map[string]bool{"success": true}, nil
}

func toRPCError(err error) *rpcError {
	switch {
	case errors.Is(err, errConflict):
		return &rpcError{Code: codeConflict, Message: msgConflict}
	case errors.Is(err, fs.ErrNotExist):
		return &rpcError{Code: codeInternal, Message: "Internal error: no such file or directory"}
	}
	return &rpcError{Code: codeInternal, Message: "Internal error: " + err.Error()}
}

type execResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// exec runs command with sh -c in the workspace; on timeout its process group is killed and exitCode is -1.
func (a *Agent) exec(ctx context.Context, command string, timeout time.Duration) execResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = a.cfg.Workspace
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	stdout, stderr := &capBuffer{max: maxExecOutput}, &capBuffer{max: maxExecOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	res := execResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.ExitCode = -1
		if res.Stderr != "" && res.Stderr[len(res.Stderr)-1] != '\n' {
			res.Stderr += "\n"
		}
		res.Stderr += "timed out"
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		res.ExitCode = -1
		res.Stderr += fmt.Sprintf("failed to run command: %v", err)
	}
	return res
}

// capBuffer keeps the first max bytes written and discards the rest.
type capBuffer struct {
	buf bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capBuffer) String() string { return c.buf.String() }
