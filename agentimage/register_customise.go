package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/nodekernel"
	"github.com/sandgate/sandgate/agentimage/internal/server"
	"github.com/sandgate/sandgate/agentimage/internal/startup"
)

// registerCustomise adds what users customise in a sandbox: the Node.js kernel, and the start-up sequence (package
// mirrors, dependencies, init commands, supervised services) that GET /health waits for. It runs the sequence in
// the background; services stop when ctx ends.
func registerCustomise(ctx context.Context, srv *server.Server, hs *http.Server, cfg config, logger *slog.Logger) {
	// Dependencies live in the workspace; every process the agent starts from now on finds them.
	paths := startup.PathsFor(cfg.workspace)
	for k, v := range paths.Environ() {
		os.Setenv(k, v)
	}
	scfg, cfgErr := startup.ConfigFromEnv(os.Getenv("HOME"), cfg.workspace)
	for _, name := range []string{agentapi.EnvInit, agentapi.EnvServices, agentapi.EnvDependencies, agentapi.EnvMirrors} {
		os.Unsetenv(name)
	}
	st := startup.New(scfg, cfgErr, logger.With("component", "startup"))

	kernel := nodekernel.New(nodekernel.Config{Dir: cfg.workspace, Logger: logger.With("component", "nodekernel")})
	srv.HandleFunc("POST /v1/node/exec", kernel.ServeExec)
	srv.HandleFunc("GET /v1/services", func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, http.StatusOK, map[string]any{"services": st.Services()})
	})
	srv.HandleFunc("GET /v1/init/log", func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, http.StatusOK, st.Log())
	})
	hs.Handler = st.GateHealth(hs.Handler, version)
	go func() {
		st.Run(ctx)
		<-ctx.Done()
		kernel.Close()
	}()
}
