package agentapi

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Process statuses. A process is running until it exits; the other three are final.
const (
	StatusRunning  = "running"
	StatusExited   = "exited"
	StatusTimedOut = "timed_out"
	StatusKilled   = "killed"
)

// Output encodings of chunks and captured output: utf8 when the bytes are valid UTF-8, base64 otherwise.
const (
	EncodingUTF8   = "utf8"
	EncodingBase64 = "base64"
)

// SSE event names of an exec stream (POST /v1/exec with Accept: text/event-stream, GET /v1/processes/{id}/events).
const (
	EventStart     = "start"
	EventStdout    = "stdout"
	EventStderr    = "stderr"
	EventKeepalive = "keepalive"
	EventEnd       = "end"
)

// Stream names, as used in events and chunks.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// ExecRequest is the body of POST /v1/exec. Exactly one of Cmd (run by /bin/bash -c) and Argv (run directly) is set.
type ExecRequest struct {
	Cmd  string   `json:"cmd,omitempty"`
	Argv []string `json:"argv,omitempty"`
	// Cwd is relative to the workspace root (or absolute inside it); empty means the workspace root.
	Cwd string `json:"cwd,omitempty"`
	// Env is added to the agent's environment for this process only.
	Env map[string]string `json:"env,omitempty"`
	// Stdin is written to the process's standard input, which is then closed unless KeepStdin is set.
	Stdin         string `json:"stdin,omitempty"`
	StdinEncoding string `json:"stdin_encoding,omitempty"`
	// KeepStdin leaves standard input open for POST /v1/processes/{id}/stdin.
	KeepStdin bool `json:"keep_stdin,omitempty"`
	// TimeoutMS is the hard limit: the process group gets SIGTERM, then SIGKILL. 0 means the agent's default
	// (no limit for streamed and yielded execs, DefaultExecTimeoutMS otherwise).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// YieldMS is the soft limit of a JSON exec: when it passes the reply says "running" and the process goes on.
	YieldMS int64 `json:"yield_ms,omitempty"`
	// MaxOutputBytes caps stdout and stderr each in a JSON reply (the tail is kept); default DefaultMaxOutputBytes.
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	// Tag is a caller's label, listed with the process.
	Tag string `json:"tag,omitempty"`
	// PTY runs the process on a pseudo-terminal of this size: its output is all on stdout.
	PTY *PTYSize `json:"pty,omitempty"`
}

// Defaults of ExecRequest.
const (
	DefaultExecTimeoutMS  = 10 * 60 * 1000
	DefaultMaxOutputBytes = 256 << 10
	// RingBytes is how much of each stream the agent keeps for replay.
	RingBytes = 1 << 20
)

// PTYSize is a terminal size.
type PTYSize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// ExecResult is the JSON reply of POST /v1/exec and the body of GET /v1/processes/{id}.
type ExecResult struct {
	ID     string   `json:"id"`
	PID    int      `json:"pid"`
	Tag    string   `json:"tag,omitempty"`
	Cmd    string   `json:"cmd,omitempty"`
	Argv   []string `json:"argv,omitempty"`
	Status string   `json:"status"`
	// ExitCode is set once the process has ended; a non-zero exit is a result, not an error.
	ExitCode *int `json:"exit_code"`
	// Signal names the signal that ended the process ("SIGKILL"), if one did.
	Signal string `json:"signal,omitempty"`
	// Stdout and Stderr are the captured output (the tail, if Truncated), in StdoutEncoding/StderrEncoding.
	Stdout         string `json:"stdout"`
	Stderr         string `json:"stderr"`
	StdoutEncoding string `json:"stdout_encoding,omitempty"`
	StderrEncoding string `json:"stderr_encoding,omitempty"`
	// StdoutOffset and StderrOffset are the total bytes each stream has produced: resume events from there.
	StdoutOffset int64 `json:"stdout_offset"`
	StderrOffset int64 `json:"stderr_offset"`
	// Truncated says Stdout or Stderr does not hold everything the process wrote.
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	StartedAt  string `json:"started_at,omitempty"`
	EndedAt    string `json:"ended_at,omitempty"`
	PTY        bool   `json:"pty,omitempty"`
}

// Final reports whether the process has ended.
func (r ExecResult) Final() bool { return r.Status != "" && r.Status != StatusRunning }

// StdoutBytes decodes Stdout.
func (r ExecResult) StdoutBytes() ([]byte, error) { return DecodeData(r.Stdout, r.StdoutEncoding) }

// StderrBytes decodes Stderr.
func (r ExecResult) StderrBytes() ([]byte, error) { return DecodeData(r.Stderr, r.StderrEncoding) }

// OutputChunk is the data of a stdout or stderr event.
type OutputChunk struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
	// Offset is the absolute byte offset of the chunk's first byte in its stream. A chunk starting past the end of
	// the previous one means the reader fell behind the ring and bytes in between are gone.
	Offset int64 `json:"offset"`
}

// Bytes decodes the chunk.
func (c OutputChunk) Bytes() ([]byte, error) { return DecodeData(c.Data, c.Encoding) }

// KeepaliveData is the data of a keepalive event.
type KeepaliveData struct {
	Time string `json:"time"`
}

// ExecEvent is one server-sent event of an exec stream, decoded.
type ExecEvent struct {
	// Event is one of the Event* names.
	Event string
	// ID is the SSE id: a Cursor, to resume with Last-Event-ID or ?since=.
	ID string
	// Chunk is set for stdout and stderr events.
	Chunk *OutputChunk
	// Process is set for start and end events (end carries the final status and exit code).
	Process *ExecResult
	// Raw is the event's data as sent.
	Raw []byte
}

// Cursor is a position in both output streams; on the wire "<stdout_offset>:<stderr_offset>".
type Cursor struct {
	Stdout int64
	Stderr int64
}

func (c Cursor) String() string {
	return strconv.FormatInt(c.Stdout, 10) + ":" + strconv.FormatInt(c.Stderr, 10)
}

// ParseCursor reads "<stdout>:<stderr>", or a single offset that applies to both streams ("0" is the start).
func ParseCursor(s string) (Cursor, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Cursor{}, nil
	}
	out, errs, two := strings.Cut(s, ":")
	o, err := strconv.ParseInt(out, 10, 64)
	if err != nil || o < 0 {
		return Cursor{}, fmt.Errorf("cursor %q: want <stdout_offset>:<stderr_offset>", s)
	}
	if !two {
		return Cursor{Stdout: o, Stderr: o}, nil
	}
	e, err := strconv.ParseInt(errs, 10, 64)
	if err != nil || e < 0 {
		return Cursor{}, fmt.Errorf("cursor %q: want <stdout_offset>:<stderr_offset>", s)
	}
	return Cursor{Stdout: o, Stderr: e}, nil
}

// EncodeData returns b as a string and its encoding: utf8 when valid, base64 otherwise.
func EncodeData(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), EncodingUTF8
	}
	return base64.StdEncoding.EncodeToString(b), EncodingBase64
}

// DecodeData reverses EncodeData; an empty encoding means utf8.
func DecodeData(s, encoding string) ([]byte, error) {
	switch encoding {
	case "", EncodingUTF8:
		return []byte(s), nil
	case EncodingBase64:
		return base64.StdEncoding.DecodeString(s)
	default:
		return nil, Errorf(CodeInvalidRequest, "unknown encoding %q (want utf8 or base64)", encoding)
	}
}
