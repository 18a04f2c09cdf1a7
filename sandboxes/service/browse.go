package service

import (
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
	t, err := s.Running(ctx, p, id, sandboxes.CapBrowser)
	if err != nil {
		return BrowserResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, req.Timeout+AgentGrace)
	defer cancel()
	return s.cfg.Agent.Browser(ctx, t, req)
}
