package main

import (
	"log/slog"
	"os"

	"github.com/sandgate/sandgate/agentimage/internal/nodekernel"
	"github.com/sandgate/sandgate/agentimage/internal/server"
)

// registerCustomise adds what users customise in a sandbox to the agent: the Node.js kernel.
func registerCustomise(srv *server.Server, cfg config, logger *slog.Logger) {
	kernel := nodekernel.New(nodekernel.Config{Dir: cfg.workspace, Env: os.Environ(), Logger: logger.With("component", "nodekernel")})
	srv.HandleFunc("POST /v1/node/exec", kernel.ServeExec)
}
