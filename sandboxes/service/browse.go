package service

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TicketScopes are the browser routes a ticket can open.
var TicketScopes = []string{"app", "vnc", "terminal", "cdp", "pty", "files", "mcp"}

// IssueTicket mints a one-time ticket for a browser route (scope) of a sandbox p owns.
func (s *Service) IssueTicket(ctx context.Context, p Principal, id, scope string, write bool, ttl time.Duration) (Ticket, error) {
	if s.cfg.Tickets == nil {
		return Ticket{}, Errorf(CodeCapability, "tickets are not configured on this gateway").
			With("capability", "tickets").With("available", []string{})
	}
	valid := false
	for _, s := range TicketScopes {
		valid = valid || s == scope
	}
	if !valid {
		return Ticket{}, Errorf(CodeValidation, "scope must be one of %s", strings.Join(TicketScopes, ", "))
	}
	sb, err := s.Unexpired(ctx, p, id)
	if err != nil {
		return Ticket{}, err
	}
	return s.cfg.Tickets.Issue(ctx, TicketRequest{SandboxID: id, Owner: sb.Owner, Scope: scope, Write: write, TTL: ttl})
}

// Browse runs one browser action on the Chromium of a sandbox p owns.
func (s *Service) Browse(ctx context.Context, p Principal, id string, req BrowserRequest) (BrowserResult, error) {
	b, err := s.OpenBrowser(ctx, p, id)
	if err != nil {
		return BrowserResult{}, err
	}
	return b.Do(ctx, req)
}

// BrowserSession is the Chromium of one running sandbox, for a dialect that runs several actions in one request
// (Bay's browser commands and batches): the owner, expiry and capability checks and the start are made once, and
// the sandbox stays leased as long as the context it was opened with.
type BrowserSession struct {
	s *Service
	t sandboxes.Target
}

// OpenBrowser resolves a sandbox p owns that has the browser capability, starting it if it is idle.
func (s *Service) OpenBrowser(ctx context.Context, p Principal, id string) (*BrowserSession, error) {
	t, err := s.Running(ctx, p, id, sandboxes.CapBrowser)
	if err != nil {
		return nil, err
	}
	return &BrowserSession{s: s, t: t}, nil
}

// Do runs one action; the agent has req.Timeout and its grace for it.
func (b *BrowserSession) Do(ctx context.Context, req BrowserRequest) (BrowserResult, error) {
	ctx, cancel := context.WithTimeout(ctx, req.Timeout+AgentGrace)
	defer cancel()
	return b.s.cfg.Agent.Browser(ctx, b.t, req)
}

// Save writes what the browser made (a screenshot) as a workspace file of the sandbox, at a path checked as every
// workspace path is. The browser capability covers it: agent-browser writes its own screenshots into the workspace.
func (b *BrowserSession) Save(ctx context.Context, path string, data []byte) error {
	c, err := CleanWorkspacePath("path", path, false)
	if err != nil {
		return err
	}
	return b.s.cfg.Agent.WriteFile(ctx, b.t, c, bytes.NewReader(data))
}
