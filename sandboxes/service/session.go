package service

import (
	"context"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// Session is one sandbox held for a request: leased until the context it was opened with ends (the idle collector
// leaves its container alone), started if it was idle, and reachable through the agent calls below. A dialect
// never holds the agent client or the sandbox's target: it holds a Session.
type Session struct {
	s  *Service
	id string
	t  sandboxes.Target
}

// Hold leases and starts a sandbox p may see and act on (unexpired) for the length of ctx.
func (s *Service) Hold(ctx context.Context, p Principal, id string) (*Session, error) {
	t, err := s.Running(ctx, p, id, "")
	if err != nil {
		return nil, err
	}
	return &Session{s: s, id: id, t: t}, nil
}

// HoldGranted is Hold for a caller whose credential names this one sandbox and was checked already: a verified
// ticket (the terminal page) or the sandbox's access key (OpenSandbox's proxy, AccessKeyValid). The credential is
// the authority, as at the edge (routes/sandboxroute), so there is no principal to check. The lease lasts as long
// as ctx; start, when positive, bounds only the wait for an idle sandbox to start. Errors are the Manager's as they
// are.
func (s *Service) HoldGranted(ctx context.Context, id string, start time.Duration) (*Session, error) {
	l, ok := s.cfg.Sandboxes.(leaser)
	if start <= 0 || !ok {
		t, err := s.cfg.Sandboxes.Hold(ctx, id)
		if err != nil {
			return nil, err
		}
		return &Session{s: s, id: id, t: t}, nil
	}
	// The lease comes first, as in Manager.Hold: the idle collector then never stops the container this request
	// is about to use.
	release, err := l.Acquire(id)
	if err != nil {
		return nil, err
	}
	startCtx, cancel := context.WithTimeout(ctx, start)
	t, err := l.EnsureRunning(startCtx, id)
	cancel()
	if err != nil {
		release()
		return nil, err
	}
	context.AfterFunc(ctx, release)
	return &Session{s: s, id: id, t: t}, nil
}

// leaser is Hold in its two halves (*sandboxes.Manager), for a start bounded apart from the lease.
type leaser interface {
	Acquire(id string) (release func(), err error)
	EnsureRunning(ctx context.Context, id string) (sandboxes.Target, error)
}

// Target is where the held sandbox's agent answers, for an edge forwarder that streams bytes to it (OpenSandbox's
// proxy hands it to Caddy's reverse_proxy); it is valid while the session's context lasts.
func (ss *Session) Target() sandboxes.Target { return ss.t }

// Sandbox re-reads the held sandbox's record (after a failed agent call: did its container die?).
func (ss *Session) Sandbox(ctx context.Context) (sandboxes.Sandbox, error) {
	return deref(ss.s.cfg.Sandboxes.Get(ctx, ss.id))
}

// ptyAgent is the agent client's typed PTY surface (*AgentClient).
type ptyAgent interface {
	PTYSessions(ctx context.Context, t sandboxes.Target) ([]agentapi.PTYSession, error)
	OpenPTY(ctx context.Context, t sandboxes.Target, req agentapi.PTYCreateRequest) (agentapi.PTYSession, error)
}

func (ss *Session) ptys() (ptyAgent, error) {
	a, ok := ss.s.cfg.Streamer.(ptyAgent)
	if !ok {
		return nil, Errorf(CodeCapability, "PTY sessions are not available on this gateway").
			With("capability", "streaming").With("available", []string{})
	}
	return a, nil
}

// PTYSessions lists the held sandbox's PTY sessions; the agent's errors are returned as they are.
func (ss *Session) PTYSessions(ctx context.Context) ([]agentapi.PTYSession, error) {
	a, err := ss.ptys()
	if err != nil {
		return nil, err
	}
	return a.PTYSessions(ctx, ss.t)
}

// OpenPTY starts a PTY session in the held sandbox; the agent's errors are returned as they are.
func (ss *Session) OpenPTY(ctx context.Context, req agentapi.PTYCreateRequest) (agentapi.PTYSession, error) {
	a, err := ss.ptys()
	if err != nil {
		return agentapi.PTYSession{}, err
	}
	return a.OpenPTY(ctx, ss.t, req)
}
