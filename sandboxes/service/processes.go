package service

import (
	"context"
	"encoding/json"
	"io"

	"github.com/sandgate/sandgate/sandboxes"
)

// Processes and PTY sessions of a sandbox's shell, through the Streamer half of the agent client.

// CanStream is nil when the gateway streams (exec streams, processes, PTY), else capability_not_supported (a
// dialect checks before it reads a request body, so a gateway without the capability says so first).
func (s *Service) CanStream() error {
	if s.cfg.Streamer == nil {
		return Errorf(CodeCapability, "streaming, processes and PTY are not available on this gateway").
			With("capability", "streaming").With("available", []string{})
	}
	return nil
}

// Processes lists the processes of a sandbox p owns as the agent reports them (a JSON document).
func (s *Service) Processes(ctx context.Context, p Principal, id string) (json.RawMessage, error) {
	t, err := s.streamTarget(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return s.cfg.Streamer.Processes(ctx, t)
}

// ProcessOutput resumes a process's events as SSE from a cursor ("" is the start).
func (s *Service) ProcessOutput(ctx context.Context, p Principal, id, pid, since string) (io.ReadCloser, error) {
	t, err := s.streamTarget(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return s.cfg.Streamer.ProcessOutput(ctx, t, pid, since)
}

// Signal sends a signal (TERM, KILL, INT, HUP...) to a process group of a sandbox p owns.
func (s *Service) Signal(ctx context.Context, p Principal, id, pid, signal string) error {
	t, err := s.streamTarget(ctx, p, id)
	if err != nil {
		return err
	}
	return s.cfg.Streamer.Signal(ctx, t, pid, signal)
}

// CreatePTY opens a terminal in a sandbox p owns, in cwd ("" is the workspace root), and returns the agent's
// description of it (a JSON document with its id).
func (s *Service) CreatePTY(ctx context.Context, p Principal, id string, req PTYRequest, cwd string) (json.RawMessage, error) {
	if err := s.CanStream(); err != nil {
		return nil, err
	}
	t, err := s.shellTarget(ctx, id, p, &cwd, &req.Cwd)
	if err != nil {
		return nil, err
	}
	return s.cfg.Streamer.CreatePTY(ctx, t, req)
}

func (s *Service) streamTarget(ctx context.Context, p Principal, id string) (sandboxes.Target, error) {
	if err := s.CanStream(); err != nil {
		return sandboxes.Target{}, err
	}
	return s.Running(ctx, p, id, sandboxes.CapShell)
}
