package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/sandgate/sandgate/agentimage/internal/ideagent"
)

// registerIDE writes FastGPT's package-mirror files when configured and, with IDE_AGENT_ENABLED=true, starts
// FastGPT's IDE-agent protocol on its own listeners (:1318 WebSocket, :1319 preview) until ctx ends.
func registerIDE(ctx context.Context, logger *slog.Logger) error {
	ideagent.ApplyMirrors(os.Getenv("HOME"), ideagent.MirrorsFromEnv(), logger)
	cfg, enabled, err := ideagent.ConfigFromEnv(logger.With("component", "ide-agent"))
	if err != nil {
		return fmt.Errorf("IDE agent configuration: %w", err)
	}
	if !enabled {
		return nil
	}
	if _, err := ideagent.Start(ctx, cfg); err != nil {
		return fmt.Errorf("starting IDE agent: %w", err)
	}
	return nil
}
