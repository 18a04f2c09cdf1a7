package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandgate/sandgate/tickets"
)

// Ticket is a short-lived, one-time credential for a browser URL of one sandbox.
type Ticket struct {
	Ticket    string    `json:"ticket"`
	URL       string    `json:"url,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TicketRequest asks for a ticket.
type TicketRequest struct {
	SandboxID string
	Owner     string
	// Scope is what the ticket opens: app, vnc, terminal, cdp, pty, files.
	Scope string
	// Write asks for write permission (typing into a terminal, uploading); tickets are read-only otherwise.
	Write bool
	TTL   time.Duration
}

// TicketIssuer mints tickets (the edge's Issuer).
type TicketIssuer interface {
	Issue(ctx context.Context, req TicketRequest) (Ticket, error)
}

// TicketMinter mints tickets with the edge's Issuer; the URL points at the browser route of the sandbox.
type TicketMinter struct {
	issuer *tickets.Issuer
	urls   tickets.URLs
}

// NewTicketMinter mints with iss and builds URLs with urls.
func NewTicketMinter(iss *tickets.Issuer, urls tickets.URLs) TicketMinter {
	return TicketMinter{issuer: iss, urls: urls}
}

// Issue mints one ticket; a bad scope or lifetime is validation_error, a caller over its budget rate_limited.
func (b TicketMinter) Issue(_ context.Context, req TicketRequest) (Ticket, error) {
	perm := tickets.PermRead
	if req.Write {
		perm = tickets.PermWrite
	}
	tk, err := b.issuer.Issue(tickets.IssueRequest{SandboxID: req.SandboxID, Kind: tickets.Kind(req.Scope), Permission: perm,
		Lifetime: req.TTL, Subject: req.Owner})
	var limited *tickets.RateLimitedError
	if errors.As(err, &limited) {
		return Ticket{}, err // AsError makes it rate_limited with RetryAfter
	}
	if err != nil {
		return Ticket{}, Errorf(CodeValidation, "%v", err)
	}
	out := Ticket{Ticket: tk.Token, ExpiresAt: tk.ExpiresAt}
	// Without a base for the kind's origin the answer carries the ticket only: a bare path means nothing to an
	// API client.
	if b.urls.Gateway != "" || b.urls.OnContentOrigin(tickets.Kind(req.Scope)) {
		out.URL = b.urls.Ticket(req.SandboxID, tickets.Kind(req.Scope), tk.Token)
	}
	return out, nil
}

var _ TicketIssuer = TicketMinter{}

// TicketMinterFor is the minter of a gateway's configuration: it mints with secret and builds URLs under the
// gateway's and the content origin's base URLs (tickets.ParseURLs); without a secret there is none (nil), and the
// ticket routes are off.
func TicketMinterFor(secret, baseURL, contentBaseURL string) (TicketIssuer, error) {
	if secret == "" {
		return nil, nil
	}
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(secret)})
	if err != nil {
		return nil, fmt.Errorf("ticket_secret: %w", err)
	}
	urls, err := tickets.ParseURLs(baseURL, contentBaseURL)
	if err != nil {
		return nil, fmt.Errorf("ticket URLs: %w", err)
	}
	return NewTicketMinter(iss, urls), nil
}
