package sandboxroute

import (
	"strings"
	"time"

	"github.com/sandgate/sandgate/tickets"
)

// GateConfig is a Gate as the gateway's configuration names it.
type GateConfig struct {
	Verifier *tickets.Verifier
	// BaseDomains as written: case and surrounding dots do not matter, empty ones are dropped.
	BaseDomains []string
	// Kind restricts the gate to one route kind; "" admits any.
	Kind string
	// Session is the session cookie's lifetime: 0 is tickets.DefaultSessionLifetime, negative disables sessions.
	Session time.Duration
}

// NewGate checks the kind and makes the gate (without API keys: set Gate.APIKeys to admit them).
func NewGate(c GateConfig) (*Gate, error) {
	g := &Gate{Verifier: c.Verifier, SessionLifetime: c.Session}
	if c.Kind != "" {
		k, err := tickets.ParseKind(c.Kind)
		if err != nil {
			return nil, err
		}
		g.Kind = k
	}
	switch {
	case c.Session == 0:
		g.SessionLifetime = tickets.DefaultSessionLifetime
	case c.Session < 0:
		g.SessionLifetime = 0
	}
	for _, b := range c.BaseDomains {
		if b = strings.Trim(strings.ToLower(b), "."); b != "" {
			g.BaseDomains = append(g.BaseDomains, b)
		}
	}
	return g, nil
}
