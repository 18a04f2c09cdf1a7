package agentapi

// ProcessList is the body of GET /v1/processes.
type ProcessList struct {
	Processes []ExecResult `json:"processes"`
}

// StdinRequest is the body of POST /v1/processes/{id}/stdin.
type StdinRequest struct {
	Data     string `json:"data,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	// EOF closes standard input after Data is written.
	EOF bool `json:"eof,omitempty"`
}

// SignalRequest is the body of POST /v1/processes/{id}/signal. Signal is a name ("SIGINT", "INT") or a number.
type SignalRequest struct {
	Signal string `json:"signal"`
}

// Query parameters and headers of the events route.
const (
	// QuerySince is a Cursor to resume from; Last-Event-ID does the same.
	QuerySince = "since"
	// DetailOldestOffset is the replay_gone detail naming the oldest offset still held (a Cursor string).
	DetailOldestOffset = "oldest_offset"
)

// ProcessRetention is how long an ended process's record (status, exit code, output ring) is kept, in seconds.
const ProcessRetentionSeconds = 600
