package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/server"
)

// awaitClaim is the agent of a warm sandbox of a caller-chosen image (agentapi.EnvAwaitClaim): it serves GET
// /health and the token-checked POST /v1/claim, and nothing else runs in the sandbox meanwhile. On a claim it
// replaces itself (execve, same arguments) with an agent in the claim's environment, which then starts as a cold
// sandbox's would: HOME seeded, the image's entrypoint supervised, every process in the create's environment. It
// returns only on failure; a stop (SIGTERM) while waiting ends the process with status 0.
func awaitClaim(logger *slog.Logger) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the agent's own binary: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.addr, err)
	}
	var sock net.Listener
	if cfg.socket != "" {
		if sock, err = listenSocket(cfg.socket); err != nil {
			ln.Close()
			return err
		}
	}
	srv := server.New(server.Config{Token: cfg.token, Version: version, Logger: logger})
	claims := make(chan []string, 1)
	srv.HandleFunc("POST "+agentapi.ClaimPath, func(w http.ResponseWriter, r *http.Request) {
		var c agentapi.ClaimRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, agentapi.MaxClaimBytes)).Decode(&c); err != nil {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "reading the claim: %v", err))
			return
		}
		if err := c.Validate(); err != nil {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "%v", err))
			return
		}
		c.Unset = append(c.Unset, agentapi.EnvAwaitClaim) // the fresh agent must not wait again
		select {
		case claims <- agentapi.ApplyClaim(os.Environ(), c):
			w.WriteHeader(http.StatusNoContent)
		default:
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeConflict, "the sandbox is already claimed"))
		}
	})
	hs := srv.NewHTTPServer(cfg.addr)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	if sock != nil {
		go func() { errc <- hs.Serve(sock) }()
	}
	logger.Info("agent waiting for its claim", "addr", cfg.addr, "version", version,
		"startup_ms", time.Since(processStart).Milliseconds())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var env []string
	select {
	case env = <-claims:
	case err := <-errc:
		return fmt.Errorf("serving %s: %w", cfg.addr, err)
	case <-ctx.Done():
		os.Exit(0)
	}
	// The claim's answer is written before the listeners close: Shutdown waits for the handler to finish.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("closing the waiting listeners", "error", err)
	}
	logger.Info("claimed: starting in the create's environment")
	return fmt.Errorf("starting the claimed agent: %w", syscall.Exec(self, os.Args, env))
}
