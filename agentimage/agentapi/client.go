package agentapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one agent's HTTP API. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
	pin   agentPin // the agent every request is pinned to (pin.go)
}

// NewClient returns a client for the agent at baseURL ("http://10.0.0.5:7777"). httpClient nil means
// http.DefaultClient; it should have no overall Timeout if streams are used (contexts bound each call instead).
// The client uses a copy of httpClient that follows no redirect (NoRedirect), and pins every request to
// baseURL's agent, so a SocketTransport under it dials that agent only.
func NewClient(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	hc := *httpClient
	hc.CheckRedirect = NoRedirect
	base := strings.TrimRight(baseURL, "/")
	return &Client{base: base, token: token, http: &hc, pin: pinOfBase(base)}
}

// DefaultCallTimeout bounds a JSON call whose context has no deadline of its own: an agent that never answers, or
// answers without end, holds the gateway's request no longer than this. Calls that run the tenant's code (exec,
// kernels) carry their own deadline, their timeout and a grace.
const DefaultCallTimeout = 10 * time.Minute

// maxDiscard is how much of a reply the client reads only to reuse its connection; past it the connection is
// closed instead.
const maxDiscard = 64 << 10

// BaseURL is the agent's base URL.
func (c *Client) BaseURL() string { return c.base }

// NewRequest builds an authenticated request to path (which may carry a query), pinned to the client's agent.
func (c *Client) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(context.WithValue(ctx, pinKey{}, c.pin), method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set(TokenHeader, c.token)
	}
	return req, nil
}

// Do sends req and returns the response when its status is 2xx or 304; otherwise the typed *Error. A redirect is
// never followed: it is a bad_reply error (matching ErrRedirect).
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotModified {
		return resp, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		var to *url.URL
		if loc := resp.Header.Get("Location"); loc != "" {
			to, _ = url.Parse(loc)
		}
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, redirectError(resp.Status, to))
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxDiscard))
	return nil, ReadError(resp, body)
}

func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s body: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.NewRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		// A reply nobody reads: a little is drained to keep the connection, the rest (an agent answering without
		// end) is cut by closing it.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDiscard))
		return nil
	}
	tr, truncatable := out.(Truncatable)
	b, cut, err := readBoundedJSON(resp.Body, MaxReplyBytes, MaxReplyString, truncatable)
	if err != nil {
		return fmt.Errorf("reading %s reply: %w", path, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding %s reply: %w", path, err)
	}
	if cut {
		tr.MarkTruncated()
	}
	return nil
}

// Health calls GET /health (no token needed).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.doJSON(ctx, http.MethodGet, "/health", nil, &h)
}

// Info calls GET /v1/info.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var i Info
	return i, c.doJSON(ctx, http.MethodGet, "/v1/info", nil, &i)
}

// Exec runs a command and waits for it to end (or for YieldMS/TimeoutMS): POST /v1/exec, JSON reply.
// A non-zero exit code is in the result, not an error.
func (c *Client) Exec(ctx context.Context, r ExecRequest) (ExecResult, error) {
	var res ExecResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/exec", r, &res)
}

// ExecStream runs a command and streams its events (POST /v1/exec, Accept: text/event-stream). Close the stream
// when done; closing it does not stop the process (KillProcess does).
func (c *Client) ExecStream(ctx context.Context, r ExecRequest) (*EventStream, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding exec request: %w", err)
	}
	req, err := c.NewRequest(ctx, http.MethodPost, "/v1/exec", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.openStream(req)
}

// ProcessEvents streams a process's events from cursor since ("" or "0" is the start; an ExecEvent.ID resumes
// after that event). A cursor older than the ring answers replay_gone (410) with the oldest cursor in Details.
func (c *Client) ProcessEvents(ctx context.Context, id, since string) (*EventStream, error) {
	path := "/v1/processes/" + url.PathEscape(id) + "/events"
	if since != "" {
		path += "?" + QuerySince + "=" + url.QueryEscape(since)
	}
	req, err := c.NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return c.openStream(req)
}

func (c *Client) openStream(req *http.Request) (*EventStream, error) {
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: want an event stream, got %q", req.Method, req.URL.Path, ct)
	}
	return &EventStream{body: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
}

// Process calls GET /v1/processes/{id}; the result holds the output tail.
func (c *Client) Process(ctx context.Context, id string) (ExecResult, error) {
	var res ExecResult
	return res, c.doJSON(ctx, http.MethodGet, "/v1/processes/"+url.PathEscape(id), nil, &res)
}

// Processes calls GET /v1/processes (running and recently ended processes, without output).
func (c *Client) Processes(ctx context.Context) ([]ExecResult, error) {
	var l ProcessList
	return l.Processes, c.doJSON(ctx, http.MethodGet, "/v1/processes", nil, &l)
}

// ProcessStdin writes to a process's standard input (POST /v1/processes/{id}/stdin).
func (c *Client) ProcessStdin(ctx context.Context, id string, r StdinRequest) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/processes/"+url.PathEscape(id)+"/stdin", r, nil)
}

// ProcessSignal sends a signal to a process's group (POST /v1/processes/{id}/signal).
func (c *Client) ProcessSignal(ctx context.Context, id, signal string) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/processes/"+url.PathEscape(id)+"/signal", SignalRequest{Signal: signal}, nil)
}

// KillProcess kills a process's group (DELETE /v1/processes/{id}) and returns its final record.
func (c *Client) KillProcess(ctx context.Context, id string) (ExecResult, error) {
	var res ExecResult
	return res, c.doJSON(ctx, http.MethodDelete, "/v1/processes/"+url.PathEscape(id), nil, &res)
}

// CreatePTY starts a PTY session (POST /v1/pty); attach to WS /v1/pty/{id}/ws.
func (c *Client) CreatePTY(ctx context.Context, r PTYCreateRequest) (PTYSession, error) {
	var s PTYSession
	return s, c.doJSON(ctx, http.MethodPost, "/v1/pty", r, &s)
}

// PTYSessions calls GET /v1/pty.
func (c *Client) PTYSessions(ctx context.Context) ([]PTYSession, error) {
	var l PTYList
	return l.Sessions, c.doJSON(ctx, http.MethodGet, "/v1/pty", nil, &l)
}

// DeletePTY ends a PTY session (DELETE /v1/pty/{id}).
func (c *Client) DeletePTY(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/pty/"+url.PathEscape(id), nil, nil)
}

// PTYWebSocketURL is the ws:// URL of a session; send the token in the X-Sandgate-Token header when dialing.
func (c *Client) PTYWebSocketURL(id string, since int64, takeover bool) string {
	u := "ws" + strings.TrimPrefix(c.base, "http") + "/v1/pty/" + url.PathEscape(id) + "/ws"
	q := url.Values{}
	if since > 0 {
		q.Set(QuerySince, strconv.FormatInt(since, 10))
	}
	if takeover {
		q.Set(QueryTakeover, "1")
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// DownloadOptions tunes Download.
type DownloadOptions struct {
	// Range is an HTTP Range header value ("bytes=0-99").
	Range string
	// IfNoneMatch is an ETag: a match answers NotModified with no body.
	IfNoneMatch string
}

// Download is an open file download. Close Body.
type Download struct {
	Body io.ReadCloser
	// Status is 200, 206 (Range) or 304 (IfNoneMatch matched; Body is empty).
	Status        int
	ContentLength int64
	ContentRange  string
	ContentType   string
	ETag          string
}

// NotModified reports a 304.
func (d *Download) NotModified() bool { return d.Status == http.StatusNotModified }

// Download opens GET /v1/files?path=.
func (c *Client) Download(ctx context.Context, path string, opts DownloadOptions) (*Download, error) {
	req, err := c.NewRequest(ctx, http.MethodGet, "/v1/files?"+QueryPath+"="+url.QueryEscape(path), nil)
	if err != nil {
		return nil, err
	}
	if opts.Range != "" {
		req.Header.Set("Range", opts.Range)
	}
	if opts.IfNoneMatch != "" {
		req.Header.Set("If-None-Match", opts.IfNoneMatch)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	return &Download{Body: resp.Body, Status: resp.StatusCode, ContentLength: resp.ContentLength,
		ContentRange: resp.Header.Get("Content-Range"), ContentType: resp.Header.Get("Content-Type"),
		ETag: resp.Header.Get("ETag")}, nil
}

// UploadOptions tunes Upload.
type UploadOptions struct {
	// Mode is an octal file mode ("0755"); default 0644.
	Mode string
	// IfMatch is the ETag the file must still have ("*": must exist); a mismatch is precondition_failed.
	IfMatch string
	// Size is the body's length if known (-1 or 0: unknown, sent chunked).
	Size int64
}

// Upload streams body to path (PUT /v1/files), written atomically; parents are created.
func (c *Client) Upload(ctx context.Context, path string, body io.Reader, opts UploadOptions) (WriteResult, error) {
	q := url.Values{QueryPath: {path}}
	if opts.Mode != "" {
		q.Set(QueryMode, opts.Mode)
	}
	req, err := c.NewRequest(ctx, http.MethodPut, "/v1/files?"+q.Encode(), body)
	if err != nil {
		return WriteResult{}, err
	}
	if opts.Size > 0 {
		req.ContentLength = opts.Size
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if opts.IfMatch != "" {
		req.Header.Set("If-Match", opts.IfMatch)
	}
	resp, err := c.Do(req)
	if err != nil {
		return WriteResult{}, err
	}
	defer resp.Body.Close()
	var res WriteResult
	b, _, err := readBoundedJSON(resp.Body, 1<<20, 0, false)
	if err != nil {
		return res, fmt.Errorf("reading upload reply: %w", err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return res, fmt.Errorf("decoding upload reply: %w", err)
	}
	return res, nil
}

// FSStat calls POST /v1/fs/stat.
func (c *Client) FSStat(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	return fi, c.doJSON(ctx, http.MethodPost, "/v1/fs/stat", PathRequest{Path: path}, &fi)
}

// FSList calls POST /v1/fs/list.
func (c *Client) FSList(ctx context.Context, r ListRequest) (ListResult, error) {
	var res ListResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/fs/list", r, &res)
}

// FSMkdir calls POST /v1/fs/mkdir.
func (c *Client) FSMkdir(ctx context.Context, r MkdirRequest) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/fs/mkdir", r, nil)
}

// FSMove calls POST /v1/fs/move.
func (c *Client) FSMove(ctx context.Context, r MoveRequest) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/fs/move", r, nil)
}

// FSCopy calls POST /v1/fs/copy.
func (c *Client) FSCopy(ctx context.Context, r MoveRequest) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/fs/copy", r, nil)
}

// FSRemove calls POST /v1/fs/remove.
func (c *Client) FSRemove(ctx context.Context, r RemoveRequest) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/fs/remove", r, nil)
}

// FSRead calls POST /v1/fs/read.
func (c *Client) FSRead(ctx context.Context, r ReadRequest) (ReadResult, error) {
	var res ReadResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/fs/read", r, &res)
}

// FSWrite calls POST /v1/fs/write.
func (c *Client) FSWrite(ctx context.Context, r WriteRequest) (WriteResult, error) {
	var res WriteResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/fs/write", r, &res)
}

// FSEdit calls POST /v1/fs/edit.
func (c *Client) FSEdit(ctx context.Context, r EditRequest) (EditResult, error) {
	var res EditResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/fs/edit", r, &res)
}

// FSGrep calls POST /v1/fs/grep.
func (c *Client) FSGrep(ctx context.Context, r GrepRequest) (GrepResult, error) {
	var res GrepResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/fs/grep", r, &res)
}

// FSGlob calls POST /v1/fs/glob.
func (c *Client) FSGlob(ctx context.Context, r GlobRequest) (GlobResult, error) {
	var res GlobResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/fs/glob", r, &res)
}

// EventStream reads server-sent events of an exec stream:
//
//	for s.Next() { ev := s.Event(); ... }
//	if err := s.Err(); err != nil { ... }
//
// A stream that closes without an end event is reported by Err as io.ErrUnexpectedEOF: the process may still run,
// resume with ProcessEvents from the last event's ID.
type EventStream struct {
	body   io.ReadCloser
	r      *bufio.Reader
	ev     ExecEvent
	err    error
	ended  bool
	lastID string
}

// Next reads the next event; false at the end of the stream or on error.
func (s *EventStream) Next() bool {
	if s.err != nil || s.ended {
		return false
	}
	ev, err := ReadSSE(s.r)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		s.err = fmt.Errorf("reading exec events after %q: %w", s.lastID, err)
		return false
	}
	if ev.ID != "" {
		s.lastID = ev.ID
	}
	s.ev = ev
	if ev.Event == EventEnd {
		s.ended = true
	}
	return true
}

// Event is the event Next read.
func (s *EventStream) Event() ExecEvent { return s.ev }

// Err is the error that stopped Next, nil after an end event.
func (s *EventStream) Err() error { return s.err }

// LastID is the ID of the last event read that had one: a cursor to resume from.
func (s *EventStream) LastID() string { return s.lastID }

// Close releases the connection.
func (s *EventStream) Close() error { return s.body.Close() }

// ReadSSE reads one event from r (comment lines skipped) and decodes its data by event name. It returns io.EOF
// when r ends before an event starts.
func ReadSSE(r *bufio.Reader) (ExecEvent, error) {
	var ev ExecEvent
	var data []byte
	seen := false
	for {
		line, err := readSSELine(r, MaxSSELine)
		if err != nil {
			if err == io.EOF && (seen || len(line) > 0) {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if !seen {
				continue
			}
			break
		}
		if line[0] == ':' {
			continue
		}
		seen = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Event = string(value)
		case "id":
			ev.ID = string(value)
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
	if ev.Event == "" {
		ev.Event = "message"
	}
	ev.Raw = data
	var err error
	switch ev.Event {
	case EventStdout, EventStderr:
		ev.Chunk = &OutputChunk{}
		err = json.Unmarshal(data, ev.Chunk)
	case EventStart, EventEnd:
		ev.Process = &ExecResult{}
		err = json.Unmarshal(data, ev.Process)
	}
	if err != nil {
		return ev, fmt.Errorf("decoding %s event: %w", ev.Event, err)
	}
	return ev, nil
}
