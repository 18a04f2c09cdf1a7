package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// TestRegisterIDEChoice: SANDGATE_IDE_AGENT=image leaves FastGPT's IDE ports to an injected image's own IDE agent
// even with IDE_AGENT_ENABLED=true, and an unknown value is refused.
func TestRegisterIDEChoice(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("IDE_AGENT_ENABLED", "true")
	t.Setenv("HOME", t.TempDir())
	// The port is taken: starting our IDE agent would fail, so a nil error means it did not try.
	t.Setenv("IDE_AGENT_BIND_ADDR", ln.Addr().String())
	t.Setenv(agentapi.EnvIDEAgent, "image")
	if err := registerIDE(ctx, logger); err != nil {
		t.Fatalf("image: %v", err)
	}
	t.Setenv(agentapi.EnvIDEAgent, "ours")
	if err := registerIDE(ctx, logger); err == nil {
		t.Fatal("ours: started on a taken port")
	}
	t.Setenv(agentapi.EnvIDEAgent, "both")
	if err := registerIDE(ctx, logger); err == nil {
		t.Fatal("an unknown choice was accepted")
	}
}
