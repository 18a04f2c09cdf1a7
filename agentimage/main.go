// Command sandgate-agent is the agent that runs inside every sandbox: one static binary serving the sandbox's
// capabilities on one port. `sandgate-agent healthcheck` probes a running agent (the image's HEALTHCHECK).
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/entrypoint"
	"github.com/sandgate/sandgate/agentimage/internal/envfile"
	"github.com/sandgate/sandgate/agentimage/internal/server"
	"github.com/sandgate/sandgate/internal/buildversion"
)

// version is set at build time with -ldflags "-X main.version=..." (scripts/images.sh passes scripts/version.sh's
// answer); whatever it holds, the agent reports it as a semantic version (0.0.0-dev when unset).
var version = ""

func main() {
	version = buildversion.Normalize(version)
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck())
	}
	if len(os.Args) == 2 && os.Args[1] == warmupArg {
		return
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if os.Getenv(agentapi.EnvAwaitClaim) == "1" {
		// A warm member of a per-image pool: nothing starts before its create's environment arrives (await_claim.go).
		err := awaitClaim(logger)
		logger.Error("agent stopped", "error", err)
		os.Exit(1)
	}
	argv, supervise, err := entrypoint.ParseArgs(os.Args[1:])
	if err != nil {
		logger.Error("agent stopped", "error", err)
		os.Exit(2)
	}
	if supervise {
		// Before anything runs: HOME is a fresh sized tmpfs, and the image's entrypoint may live in it.
		n, err := entrypoint.SeedHome(agentapi.HomeSeedDir, homeDir())
		if err != nil {
			logger.Warn("copying the image's HOME", "copied", n, "error", err)
		}
	}
	var child *entrypoint.Child
	if supervise && len(argv) > 0 {
		child = entrypoint.New(argv, os.Stdout, os.Stderr)
	}
	if err := run(logger, child); err != nil {
		var exit *entrypointExit
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		logger.Error("agent stopped", "error", err)
		os.Exit(1)
	}
}

// entrypointExit ends the agent with the supervised entrypoint's status: the container dies with it, and the
// gateway reports it as the sandbox's crash reason.
type entrypointExit struct{ code int }

func (e *entrypointExit) Error() string {
	return fmt.Sprintf("the entrypoint exited with status %d", e.code)
}

func run(logger *slog.Logger, child *entrypoint.Child) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	// Readiness is signalled over the gateway's own connection, not found by polling: the listeners are bound
	// before the set-up below, so the gateway's /health request connects at once and waits in the kernel's accept
	// queue; it is answered the moment the agent serves (and no earlier: nothing accepts until then).
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
	// Children must not inherit the token: code in the sandbox has no business calling its own agent with it.
	os.Unsetenv(agentapi.EnvToken)
	os.Unsetenv(agentapi.EnvTokenFile)
	os.Unsetenv(agentapi.EnvTokenDigest)
	// Before the agent serves, so the first command finds it; at each start, so a resumed sandbox has it too.
	if f := os.Getenv(agentapi.EnvEnvFile); f != "" {
		names := strings.Split(os.Getenv(agentapi.EnvEnvFileNames), ",")
		if err := envfile.Write(cfg.workspace, f, envfile.Render(names, os.LookupEnv)); err != nil {
			logger.Warn("the profile's env file is missing", "path", f, "error", err)
		}
		os.Unsetenv(agentapi.EnvEnvFile)
		os.Unsetenv(agentapi.EnvEnvFileNames)
	}
	// Sandbox code runs as the agent's own user: without this it could read the agent's memory (ptrace,
	// /proc/<agent>/mem) and the tokens callers present. Children are dumpable again after their execve.
	if err := protectMemory(); err != nil {
		logger.Warn("the agent's memory stays readable by sandbox code", "error", err)
	}
	if !cfg.token.Set() {
		logger.Warn("no agent token configured; every route but /health refuses")
	}
	srv := server.New(server.Config{Token: cfg.token, Version: version, Logger: logger})
	customise := registerCustomise(srv, cfg, logger) // before the others: it sets the environment their processes inherit
	ext := registerExtras(srv, cfg, logger)
	defer ext.Close()
	srv.HandleFunc("GET /v1/info", func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, http.StatusOK, agentapi.Info{
			Version:       version,
			SandboxID:     os.Getenv(agentapi.EnvSandboxID),
			Capabilities:  cfg.capabilities,
			WorkspaceRoot: cfg.workspace,
			UptimeSeconds: time.Since(srv.Started()).Seconds(),
			Entrypoint:    childStatus(child),
		})
	})

	core, err := registerCore(srv, cfg, logger, ext.AddMCPTools)
	if err != nil {
		return err
	}
	defer core.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := registerIDE(ctx, logger); err != nil {
		return err
	}
	hs := srv.NewHTTPServer(cfg.addr)
	hs.RegisterOnShutdown(core.Close) // end processes first, so their streams finish with an end event
	customise.start(ctx, hs)
	// The image's entrypoint starts in the environment the customisation set up, before the agent serves: the
	// listeners are bound, so the gateway's /health waits in the accept queue meanwhile, and a sandbox that is ready
	// has its entrypoint started (GET /v1/info never shows it not yet started). Ready means the agent answers,
	// whatever the entrypoint is still doing.
	var childDone <-chan struct{}
	if child != nil {
		if err := child.Start(); err != nil {
			logger.Error("the image's entrypoint did not start", "error", err)
		} else {
			logger.Info("supervising the image's entrypoint", "argv", child.Status().Argv, "pid", child.Status().PID)
		}
		childDone = child.Done()
	}
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	if sock != nil {
		go func() { errc <- hs.Serve(sock) }()
		logger.Info("agent listening", "socket", cfg.socket)
	}
	logger.Info("agent listening", "addr", cfg.addr, "version", version, "workspace", cfg.workspace,
		"startup_ms", time.Since(processStart).Milliseconds())
	go warmExec(logger)
	var exit error
	select {
	case err := <-errc:
		if child != nil {
			child.Stop(context.Background(), 3*time.Second)
		}
		return fmt.Errorf("serving %s: %w", cfg.addr, err)
	case <-ctx.Done():
		if child != nil {
			// A stop: the entrypoint gets SIGTERM and most of the engine's grace period before the agent goes.
			child.Stop(context.Background(), 3*time.Second)
		}
	case <-childDone:
		st := child.Status()
		logger.Error("the image's entrypoint exited; the sandbox stops with its status",
			"argv", st.Argv, "exit_code", child.ExitCode(), "error", st.Error)
		exit = &entrypointExit{code: child.ExitCode()}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) && exit == nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return exit
}

func childStatus(c *entrypoint.Child) *agentapi.EntrypointStatus {
	if c == nil {
		return nil
	}
	st := c.Status()
	return &st
}

// listenSocket serves on a UNIX socket at path (the gateway's way in when the sandbox has no network), replacing
// the file a previous run of the agent left behind. Only the agent's user and root may connect.
func listenSocket(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restricting %s: %w", path, err)
	}
	return ln, nil
}

type config struct {
	addr         string
	socket       string
	token        agentapi.TokenCheck
	workspace    string
	capabilities []string
}

func loadConfig() (config, error) {
	c := config{
		addr:      envOr(agentapi.EnvAddr, fmt.Sprintf(":%d", agentapi.DefaultPort)),
		socket:    os.Getenv(agentapi.EnvSocket),
		workspace: envOr(agentapi.EnvWorkspace, "/workspace"),
	}
	// The gateway passes only the token's digest (agentapi.EnvTokenDigest); the token in the clear, in the
	// environment or a file, serves running the agent by hand.
	switch {
	case os.Getenv(agentapi.EnvTokenDigest) != "":
		check, err := agentapi.NewTokenCheck(os.Getenv(agentapi.EnvTokenDigest))
		if err != nil {
			return c, fmt.Errorf("%s: %w", agentapi.EnvTokenDigest, err)
		}
		c.token = check
	case os.Getenv(agentapi.EnvToken) != "":
		c.token = agentapi.TokenCheckFor(os.Getenv(agentapi.EnvToken))
	case os.Getenv(agentapi.EnvTokenFile) != "":
		b, err := os.ReadFile(os.Getenv(agentapi.EnvTokenFile))
		if err != nil {
			return c, fmt.Errorf("reading token file: %w", err)
		}
		c.token = agentapi.TokenCheckFor(strings.TrimSpace(string(b)))
	}
	for _, cap := range strings.Split(os.Getenv(agentapi.EnvCapabilities), ",") {
		if cap = strings.TrimSpace(cap); cap != "" {
			c.capabilities = append(c.capabilities, cap)
		}
	}
	if c.capabilities == nil {
		c.capabilities = []string{}
	}
	return c, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// healthcheck asks the local agent's /health; exit 0 when it answers 200.
func healthcheck() int {
	addr := envOr(agentapi.EnvAddr, fmt.Sprintf(":%d", agentapi.DefaultPort))
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get("http://" + addr + "/health")
	if err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "healthcheck: status", resp.Status)
		return 1
	}
	return 0
}

// homeDir is HOME as the gateway sets it (/home/sandbox).
func homeDir() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	return "/home/sandbox"
}
