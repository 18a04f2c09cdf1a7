package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/nodekernel"
	"github.com/sandgate/sandgate/agentimage/internal/rkernel"
	"github.com/sandgate/sandgate/agentimage/internal/server"
	"github.com/sandgate/sandgate/agentimage/internal/startup"
)

// customisation is what users customise in a sandbox: the Node.js kernel, and the start-up sequence (package
// mirrors, dependencies, init commands, supervised services) that GET /health waits for.
type customisation struct {
	st     *startup.Startup
	kernel *nodekernel.Kernel
	r      *rkernel.Kernel
}

// registerCustomise registers the routes and sets the environment every process of the sandbox inherits (the
// dependency directories on PYTHONPATH, NODE_PATH and PATH): call it before anything snapshots os.Environ.
func registerCustomise(srv *server.Server, cfg config, logger *slog.Logger) *customisation {
	paths := startup.PathsFor(cfg.workspace)
	for k, v := range paths.Environ() {
		os.Setenv(k, v)
	}
	scfg, cfgErr := startup.ConfigFromEnv(os.Getenv("HOME"), cfg.workspace)
	for _, name := range []string{agentapi.EnvInit, agentapi.EnvServices, agentapi.EnvDependencies, agentapi.EnvMirrors} {
		os.Unsetenv(name)
	}
	c := &customisation{
		st:     startup.New(scfg, cfgErr, logger.With("component", "startup")),
		kernel: nodekernel.New(nodekernel.Config{Dir: cfg.workspace, Logger: logger.With("component", "nodekernel")}),
	}
	srv.HandleFunc("POST /v1/node/exec", c.kernel.ServeExec)
	// The R session (the r image): R_LIBS_USER, the workspace library dependencies.r installs into, comes first.
	c.r = rkernel.New(rkernel.Config{Dir: cfg.workspace, Logger: logger.With("component", "rkernel")})
	srv.HandleFunc("POST /v1/r/exec", c.r.ServeExec)
	srv.HandleFunc("GET /v1/services", func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, http.StatusOK, map[string]any{"services": c.st.Services()})
	})
	srv.HandleFunc("GET /v1/init/log", func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, http.StatusOK, c.st.Log())
	})
	return c
}

// start gates GET /health on the start-up sequence and runs it in the background; services and the kernel stop
// when ctx ends.
func (c *customisation) start(ctx context.Context, hs *http.Server) {
	hs.Handler = c.st.GateHealth(hs.Handler, version)
	go func() {
		c.st.Run(ctx)
		<-ctx.Done()
		c.kernel.Close()
		c.r.Close()
	}()
}
