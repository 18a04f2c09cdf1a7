package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/ideagent"
)

// registerIDE starts FastGPT's IDE-agent protocol, with IDE_AGENT_ENABLED=true, on its own listeners (:1318
// WebSocket, :1319 preview) until ctx ends. FastGPT's package-mirror variables (AGENT_SANDBOX_*) are applied by the
// start-up sequence (internal/startup, through internal/mirrors), not here.
func registerIDE(ctx context.Context, logger *slog.Logger) error {
	switch os.Getenv(agentapi.EnvIDEAgent) {
	case "", "ours":
	case "image":
		logger.Info("leaving FastGPT's IDE protocol to the image's own IDE agent", "env", agentapi.EnvIDEAgent)
		return nil
	default:
		return fmt.Errorf("%s=%q: want ours or image", agentapi.EnvIDEAgent, os.Getenv(agentapi.EnvIDEAgent))
	}
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
