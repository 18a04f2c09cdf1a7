// Package ideagent lets the sandbox image serve FastGPT's IDE-agent protocol, so FastGPT (through its sandbox proxy
// or sandgate's fastgpt_proxy) can use our sandboxes: WebSocket /fs (JSON-RPC 2.0 file operations and change
// notifications) and /terminal (a raw PTY) on :1318, and the file preview server on :1319. Both authenticate with
// the password in $HOME/.fastgpt-ide-agent-password, which FastGPT reads through exec.
package ideagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment variables, as FastGPT sets them on the sandbox.
const (
	EnvEnabled         = "IDE_AGENT_ENABLED"
	EnvBindAddr        = "IDE_AGENT_BIND_ADDR"
	EnvPreviewAddr     = "IDE_AGENT_PREVIEW_BIND_ADDR"
	EnvWorkdir         = "FASTGPT_WORKDIR"
	EnvMaxFileBytes    = "FASTGPT_IDE_MAX_FILE_BYTES"
	EnvWSMaxMessage    = "FASTGPT_IDE_WS_MAX_MESSAGE_BYTES"
	EnvWSMaxFrame      = "FASTGPT_IDE_WS_MAX_FRAME_BYTES"
	PasswordFileName   = ".fastgpt-ide-agent-password"
	DefaultBindAddr    = ":1318"
	DefaultPreviewPort = "1319"
)

// Config is the IDE agent's configuration.
type Config struct {
	// Addr is the WebSocket listener (default :1318); PreviewAddr the preview listener (default port 1319 on
	// Addr's host).
	Addr, PreviewAddr string
	// Workspace is the root every path is relative to (FASTGPT_WORKDIR, default /workspace).
	Workspace string
	// Home holds the password file.
	Home string
	// Shell runs in terminals ($SHELL, default /bin/bash).
	Shell string
	// MaxFileBytes bounds fs/read_file and fs/write_file (FASTGPT_IDE_MAX_FILE_BYTES, default 32 MiB).
	MaxFileBytes int64
	// MaxMessageBytes bounds an incoming WebSocket message (FASTGPT_IDE_WS_MAX_MESSAGE_BYTES, default 64 MiB).
	MaxMessageBytes int64
	// MaxFrameBytes bounds an outgoing frame (FASTGPT_IDE_WS_MAX_FRAME_BYTES, default 16 MiB).
	MaxFrameBytes int64
	Logger        *slog.Logger
	// debounce is how long file changes are gathered before one fs/did_change.
	debounce time.Duration
}

// ConfigFromEnv reads the configuration; enabled reports IDE_AGENT_ENABLED=true.
func ConfigFromEnv(logger *slog.Logger) (cfg Config, enabled bool, err error) {
	enabled, _ = strconv.ParseBool(strings.TrimSpace(os.Getenv(EnvEnabled)))
	cfg = Config{
		Addr:        envOr(EnvBindAddr, DefaultBindAddr),
		PreviewAddr: os.Getenv(EnvPreviewAddr),
		Workspace:   envOr(EnvWorkdir, "/workspace"),
		Home:        os.Getenv("HOME"),
		Shell:       envOr("SHELL", "/bin/bash"),
		Logger:      logger,
	}
	for _, v := range []struct {
		name string
		dst  *int64
		def  int64
	}{
		{EnvMaxFileBytes, &cfg.MaxFileBytes, 32 << 20},
		{EnvWSMaxMessage, &cfg.MaxMessageBytes, 64 << 20},
		{EnvWSMaxFrame, &cfg.MaxFrameBytes, 16 << 20},
	} {
		*v.dst = v.def
		if s := strings.TrimSpace(os.Getenv(v.name)); s != "" {
			n, perr := strconv.ParseInt(s, 10, 64)
			if perr != nil || n <= 0 {
				return cfg, enabled, fmt.Errorf("%s=%q is not a positive byte count", v.name, s)
			}
			*v.dst = n
		}
	}
	return cfg, enabled, nil
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

func (c *Config) normalize() error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Addr == "" {
		c.Addr = DefaultBindAddr
	}
	if c.PreviewAddr == "" {
		host, _, err := net.SplitHostPort(c.Addr)
		if err != nil {
			return fmt.Errorf("IDE agent address %q: %w", c.Addr, err)
		}
		c.PreviewAddr = net.JoinHostPort(host, DefaultPreviewPort)
	}
	if c.Home == "" {
		return errors.New("HOME is not set: the IDE agent password lives there")
	}
	if c.Shell == "" {
		c.Shell = "/bin/bash"
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = 32 << 20
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 20
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = 16 << 20
	}
	if c.debounce <= 0 {
		c.debounce = 150 * time.Millisecond
	}
	abs, err := filepath.Abs(c.Workspace)
	if err != nil {
		return fmt.Errorf("workspace %q: %w", c.Workspace, err)
	}
	c.Workspace = abs
	return nil
}

// Agent is a running IDE agent.
type Agent struct {
	cfg      Config
	password string
	ws       *workspace
	watcher  *watcher
	wsSrv    *http.Server
	prevSrv  *http.Server
	// WSAddr and PreviewAddr are the bound addresses (useful with port 0).
	WSAddr, PreviewAddr string
}

// Start prepares the workspace and password, binds both listeners and serves until ctx ends.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
		return nil, fmt.Errorf("creating workspace: %w", err)
	}
	password, err := ensurePassword(filepath.Join(cfg.Home, PasswordFileName))
	if err != nil {
		return nil, err
	}
	ws, err := newWorkspace(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, password: password, ws: ws}
	a.watcher = newWatcher(ws, cfg.debounce, cfg.Logger)

	wsLn, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("IDE agent listening on %s: %w", cfg.Addr, err)
	}
	prevLn, err := net.Listen("tcp", cfg.PreviewAddr)
	if err != nil {
		wsLn.Close()
		return nil, fmt.Errorf("IDE agent preview listening on %s: %w", cfg.PreviewAddr, err)
	}
	a.WSAddr, a.PreviewAddr = wsLn.Addr().String(), prevLn.Addr().String()
	errLog := slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	a.wsSrv = &http.Server{Handler: http.HandlerFunc(a.serveWS), ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
	a.prevSrv = &http.Server{Handler: http.HandlerFunc(a.servePreview), ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
	go a.watcher.run(ctx)
	go func() { _ = a.wsSrv.Serve(wsLn) }()
	go func() { _ = a.prevSrv.Serve(prevLn) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = a.wsSrv.Shutdown(sctx)
		_ = a.prevSrv.Shutdown(sctx)
	}()
	cfg.Logger.Info("IDE agent listening", "ws", a.WSAddr, "preview", a.PreviewAddr, "workspace", cfg.Workspace)
	return a, nil
}
