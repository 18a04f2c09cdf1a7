package sandboxes

import (
	"context"
	"time"
)

// A sandbox's own output: what its container wrote to stdout and stderr (the agent's log and a supervised
// entrypoint's output), as the engine keeps it. It is the tenant's content: the Manager bounds how many lines and
// bytes one read returns and how long it takes; the dialect shapes it.

// Bounds of one log read.
const (
	MaxLogLines     = 10000            // lines one read returns at most
	MaxLogLineBytes = 4 << 10          // a longer line is cut here
	maxLogRead      = 10 * time.Second // one read's time on the engine
)

// LogLine is one line of a container's output.
type LogLine struct {
	Time   time.Time
	Stream string // "stdout" or "stderr"
	Text   string // without its newline, at most MaxLogLineBytes
}

// LogQuery selects lines. Forward reads the first Limit lines at or after Since (zero: from the start); Backward
// reads the last Limit lines before Until (zero: up to now), still oldest first.
type LogQuery struct {
	Since, Until time.Time
	Limit        int
	Backward     bool
}

// LogDriver is what a Driver offers when its engine keeps containers' output (Docker's json-file log). The
// Manager asks for it with a type assertion; an engine without it answers capability_not_supported.
type LogDriver interface {
	Logs(ctx context.Context, containerID string, q LogQuery) ([]LogLine, error)
}

// Logs reads a sandbox's container output. A sandbox with no container yet has none; one whose container was
// stopped (idle, or at its timeout: expiry.go) keeps what it wrote until the container is removed.
func (m *Manager) Logs(ctx context.Context, id string, q LogQuery) ([]LogLine, error) {
	ld, ok := m.driver.(LogDriver)
	if !ok {
		return nil, &Error{Code: CodeCapabilityAbsent, Message: "this container engine keeps no sandbox output",
			Details: map[string]any{"capability": "logs"}}
	}
	if q.Limit <= 0 || q.Limit > MaxLogLines {
		q.Limit = MaxLogLines
	}
	m.mu.RLock()
	e, err := m.visibleLocked(id)
	var cid string
	if err == nil {
		cid = e.rec.ContainerID
	}
	m.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if cid == "" {
		return []LogLine{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, maxLogRead)
	defer cancel()
	lines, err := ld.Logs(ctx, cid, q)
	if err != nil {
		return nil, &Error{Code: CodeEngine, Message: "reading sandbox " + id + "'s output", Err: err}
	}
	if len(lines) > q.Limit {
		lines = lines[:q.Limit]
	}
	return lines, nil
}
