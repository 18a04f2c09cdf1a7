package agentapi

import "time"

// The agent serves the subset of OpenSandbox's execd API that the @alibaba-group/opensandbox SDK calls under
// ExecdPrefix (specs/execd-api.yaml in opensandbox-group/OpenSandbox), behind the agent's own token. These are its
// wire types: field names, JSON shapes and error codes are execd's, so the SDK's clients work unchanged.

// ExecdPrefix is the path prefix of the execd API on the agent's port (execd's own /ping is /execd/ping here).
const ExecdPrefix = "/execd"

// ExecdTailCursorHeader carries the next cursor of GET /command/{id}/logs.
const ExecdTailCursorHeader = "EXECD-COMMANDS-TAIL-CURSOR"

// Error codes of the execd API ({"code","message"} bodies).
const (
	ExecdCodeInvalidRequest      = "INVALID_REQUEST_BODY"
	ExecdCodeMissingQuery        = "MISSING_QUERY"
	ExecdCodeRuntimeError        = "RUNTIME_ERROR"
	ExecdCodeInvalidFile         = "INVALID_FILE"
	ExecdCodeInvalidFileContent  = "INVALID_FILE_CONTENT"
	ExecdCodeInvalidFileMetadata = "INVALID_FILE_METADATA"
	ExecdCodeFileNotFound        = "FILE_NOT_FOUND"
	ExecdCodeNotSupported        = "NOT_SUPPORTED"
	ExecdCodeUnknown             = "UNKNOWN"
	// ExecdCodePathNotAllowed is ours (execd has no confinement): the path is outside the workspace and home.
	ExecdCodePathNotAllowed = "PATH_NOT_ALLOWED"
)

// ExecdError is an execd error body.
type ExecdError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ExecdRunCommand is the body of POST /command. TimeoutMS is execd's "timeout", in milliseconds.
type ExecdRunCommand struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd,omitempty"`
	Background bool              `json:"background,omitempty"`
	TimeoutMS  int64             `json:"timeout,omitempty"`
	UID        *uint32           `json:"uid,omitempty"`
	GID        *uint32           `json:"gid,omitempty"`
	Envs       map[string]string `json:"envs,omitempty"`
}

// Event types of execd's command stream.
const (
	ExecdEventInit      = "init"
	ExecdEventStdout    = "stdout"
	ExecdEventStderr    = "stderr"
	ExecdEventComplete  = "execution_complete"
	ExecdEventErr       = "error"
	ExecdEventPing      = "ping"
	ExecdErrorNameExec  = "CommandExecError"
	ExecdPingText       = "pong"
	ExecdStreamPingSecs = 3
)

// ExecdEvent is one event of execd's stream: bare JSON followed by a blank line, no SSE field names. Timestamps
// and ExecutionTime are milliseconds.
type ExecdEvent struct {
	Type           string           `json:"type,omitempty"`
	Text           string           `json:"text,omitempty"`
	ExecutionCount int              `json:"execution_count,omitempty"`
	ExecutionTime  int64            `json:"execution_time,omitempty"`
	Timestamp      int64            `json:"timestamp,omitempty"`
	Results        map[string]any   `json:"results,omitempty"`
	Error          *ExecdEventError `json:"error,omitempty"`
}

// ExecdEventError is the error of an error event; for commands EValue is the exit code in decimal.
type ExecdEventError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// ExecdCommandStatus is the body of GET /command/status/{id}.
type ExecdCommandStatus struct {
	ID         string     `json:"id"`
	Content    string     `json:"content,omitempty"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// ExecdPermission is a file's ownership and mode. Mode is the octal mode written in decimal digits (755 means
// 0755), as execd has it; 0 leaves the mode alone.
type ExecdPermission struct {
	Owner string `json:"owner"`
	Group string `json:"group"`
	Mode  int    `json:"mode"`
}

// ExecdFileInfo describes a file (files/info, files/search, directories/list). Path is absolute.
type ExecdFileInfo struct {
	Path       string    `json:"path,omitempty"`
	Type       string    `json:"type,omitempty"` // file, directory, symlink, other
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	CreatedAt  time.Time `json:"created_at"`
	ExecdPermission
}

// ExecdFileMetadata is the metadata part of an upload: where the following file part goes, and its permission.
type ExecdFileMetadata struct {
	Path string `json:"path,omitempty"`
	ExecdPermission
}

// ExecdRenameItem is one move of POST /files/mv.
type ExecdRenameItem struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
}

// ExecdReplaceItem is one replacement of POST /files/replace (every occurrence of Old).
type ExecdReplaceItem struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// ExecdReplaceResult is one file's answer of POST /files/replace?verbose=true.
type ExecdReplaceResult struct {
	ReplacedCount int `json:"replacedCount"`
}

// ExecdMetrics is the body of GET /metrics: the sandbox's own CPU and memory (its cgroup's), not the host's.
type ExecdMetrics struct {
	CPUCount    float64 `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	Timestamp   int64   `json:"timestamp"`
}
