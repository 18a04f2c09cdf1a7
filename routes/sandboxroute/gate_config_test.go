package sandboxroute

import (
	"testing"

	"github.com/sandgate/sandgate/tickets"
)

// TestNewGate: base domains are normalised, the session defaults and turns off, and an unknown kind is refused.
func TestNewGate(t *testing.T) {
	g, err := NewGate(GateConfig{BaseDomains: []string{".SB.Example.com.", "", "."}, Kind: "app"})
	if err != nil || len(g.BaseDomains) != 1 || g.BaseDomains[0] != "sb.example.com" || g.Kind != tickets.KindApp ||
		g.SessionLifetime != tickets.DefaultSessionLifetime {
		t.Fatalf("gate %+v, %v", g, err)
	}
	if g, err := NewGate(GateConfig{Session: -1}); err != nil || g.SessionLifetime != 0 || g.Kind != "" {
		t.Fatalf("session off: %+v, %v", g, err)
	}
	if _, err := NewGate(GateConfig{Kind: "shell"}); err == nil {
		t.Fatal("kind shell accepted")
	}
}
