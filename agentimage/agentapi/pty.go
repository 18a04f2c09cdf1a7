package agentapi

// PTYCreateRequest is the body of POST /v1/pty. Cmd runs with /bin/bash -c; empty means an interactive login shell.
type PTYCreateRequest struct {
	Cmd  string            `json:"cmd,omitempty"`
	Argv []string          `json:"argv,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	Cols uint16            `json:"cols,omitempty"`
	Rows uint16            `json:"rows,omitempty"`
	// IdleTTLSeconds is how long the session lives with no client attached; default DefaultPTYIdleTTLSeconds.
	IdleTTLSeconds int `json:"idle_ttl_s,omitempty"`
}

// Defaults of PTY sessions.
const (
	DefaultPTYCols           = 80
	DefaultPTYRows           = 24
	DefaultPTYIdleTTLSeconds = 30 * 60
)

// PTYSession describes a PTY session (reply of POST /v1/pty, items of GET /v1/pty).
type PTYSession struct {
	ID     string `json:"id"`
	PID    int    `json:"pid"`
	Cmd    string `json:"cmd,omitempty"`
	Cols   uint16 `json:"cols"`
	Rows   uint16 `json:"rows"`
	Status string `json:"status"`
	// ExitCode is set once the shell has ended.
	ExitCode *int `json:"exit_code"`
	// Offset is how many output bytes the session has produced (the next byte's offset).
	Offset int64 `json:"offset"`
	// Attached says a WebSocket client holds the session.
	Attached       bool   `json:"attached"`
	IdleTTLSeconds int    `json:"idle_ttl_s"`
	CreatedAt      string `json:"created_at"`
	// WebSocketPath is the path to attach to, relative to the agent's root.
	WebSocketPath string `json:"ws_path"`
}

// PTYList is the body of GET /v1/pty.
type PTYList struct {
	Sessions []PTYSession `json:"sessions"`
}

// Binary WebSocket frames of WS /v1/pty/{id}/ws start with a channel byte.
const (
	// PTYChannelStdin carries keyboard input (client to server).
	PTYChannelStdin byte = 0x00
	// PTYChannelStdout carries terminal output (server to client).
	PTYChannelStdout byte = 0x01
	// PTYChannelReplay carries buffered output on attach: 8-byte big-endian offset of the first byte, then bytes.
	PTYChannelReplay byte = 0x03
)

// Control frame types (JSON text frames {"type": ...}).
const (
	PTYControlResize    = "resize"    // client: cols, rows
	PTYControlSignal    = "signal"    // client: signal
	PTYControlPing      = "ping"      // client
	PTYControlPong      = "pong"      // server
	PTYControlConnected = "connected" // server, first frame: offset (where live output continues)
	PTYControlExit      = "exit"      // server: exit_code, signal
	PTYControlError     = "error"     // server: code, message
)

// PTYControl is a JSON text frame on the PTY WebSocket.
type PTYControl struct {
	Type     string `json:"type"`
	Cols     uint16 `json:"cols,omitempty"`
	Rows     uint16 `json:"rows,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
}

// PTY WebSocket query parameters, header and close codes.
const (
	// QueryTakeover=1 closes the current holder (code PTYCloseTakenOver) instead of answering 409.
	QueryTakeover = "takeover"
	// HeaderWSMaxMessage lets the gateway cap the size of a client message in bytes (close 1009 on excess).
	HeaderWSMaxMessage = "X-Sandgate-WS-Max-Message"
	// PTYCloseTakenOver is the close code sent to a client whose session another client took over.
	PTYCloseTakenOver = 4001
	// PTYCloseExited is the close code sent after the session's process has ended and its exit frame was sent.
	PTYCloseExited = 1000
)
