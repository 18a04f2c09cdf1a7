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
	// HistoryPage returns the page [offset, offset+limit) of a sandbox's entries that keep accepts, newest first,
	// and how many it accepts in all.
	HistoryPage(sandboxID string, keep func(*sandboxes.HistoryEntry) bool, offset, limit int) ([]*sandboxes.HistoryEntry, int, error)
	// UpdateHistory edits one entry; false when there is none.
	UpdateHistory(sandboxID, id string, fn func(*sandboxes.HistoryEntry)) (*sandboxes.HistoryEntry, bool, error)
	// Trace returns the browser trace stored under ref with one of a sandbox's entries (store_traces.go).
	Trace(sandboxID, ref string) ([]byte, bool, error)
	// TraceSandbox names the sandbox a trace ref belongs to.
	TraceSandbox(ref string) (string, bool, error)
}

// History returns one page of the executions of a sandbox p may see that keep accepts (nil: all), newest first,
// and how many it accepts in all.
func (s *Service) History(ctx context.Context, p Principal, id string, keep func(*sandboxes.HistoryEntry) bool, offset, limit int) ([]*sandboxes.HistoryEntry, int, error) {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return nil, 0, err
	}
	if s.cfg.History == nil {
		return []*sandboxes.HistoryEntry{}, 0, nil
	}
	if keep == nil {
		keep = func(*sandboxes.HistoryEntry) bool { return true }
	}
	return s.cfg.History.HistoryPage(id, keep, offset, limit)
}

// UpdateHistory edits an execution of a sandbox p may see; an entry that is not there is not_found.
func (s *Service) UpdateHistory(ctx context.Context, p Principal, id, entry string, fn func(*sandboxes.HistoryEntry)) (*sandboxes.HistoryEntry, error) {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return nil, err
	}
	if s.cfg.History == nil {
		return nil, Errorf(CodeNotFound, "Execution not found: %s", entry)
	}
	e, ok, err := s.cfg.History.UpdateHistory(id, entry, fn)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, Errorf(CodeNotFound, "Execution not found: %s", entry)
	}
	return e, nil
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
