package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/sandgate/sandgate/sandboxes"
)

// HistoryStore keeps the execution history (the gateway's embedded store).
type HistoryStore interface {
	// AddHistory queues an execution record; it is stored in the background.
	AddHistory(e *sandboxes.HistoryEntry) error
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

// EmptyToNil gives a null for an empty error/output field.
func EmptyToNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
