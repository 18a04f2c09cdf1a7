package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// HistoryEntry is one recorded execution, Bay's shape.
type HistoryEntry struct {
	ID              string  `json:"id"`
	SandboxID       string  `json:"-"`
	SessionID       *string `json:"session_id"`
	ExecType        string  `json:"exec_type"`
	Code            string  `json:"code"`
	Success         bool    `json:"success"`
	ExecutionTimeMS int64   `json:"execution_time_ms"`
	Output          *string `json:"output"`
	Error           *string `json:"error"`
	// PayloadRef names a stored payload of the execution (Bay's blob:blob-... of a learning run); null when none.
	PayloadRef  *string   `json:"payload_ref"`
	Description *string   `json:"description"`
	Tags        *string   `json:"tags"`
	Notes       *string   `json:"notes"`
	CreatedAt   time.Time `json:"created_at"`
	// Truncated is our addition: code, output or error was longer than MaxHistoryField and only its start is kept.
	Truncated bool `json:"truncated,omitempty"`
}

// HistoryStore keeps the execution history (the gateway's embedded store).
type HistoryStore interface {
	// AddHistory queues an execution record; it is stored in the background.
	AddHistory(e *HistoryEntry) error
	// DropHistory forgets a deleted sandbox's executions.
	DropHistory(sandboxID string) error
}

// kernelRun runs code in one of the sandbox's persistent kernels.
type kernelRun func(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error)

// NewID returns prefix + 12 hex digits, Bay's id shape.
func NewID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return prefix + hex.EncodeToString(b)
}

func strPtr(s string) *string { return &s }

// emptyToNil gives a null for an empty error/output field.
func emptyToNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
