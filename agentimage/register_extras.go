package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/sandgate/sandgate/agentimage/internal/browser"
	"github.com/sandgate/sandgate/agentimage/internal/portproxy"
	"github.com/sandgate/sandgate/agentimage/internal/pykernel"
	"github.com/sandgate/sandgate/agentimage/internal/server"
)

// registerExtras adds the Python kernel, the browser (CDP, VNC, REST helpers) and the port proxy to srv, starting
// the browser's processes when the profile asks for them. The returned func stops what it started.
func registerExtras(srv *server.Server, cfg config, logger *slog.Logger) (stop func()) {
	dir := cfg.workspace
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = ""
	}
	kernel := pykernel.New(pykernel.Config{Dir: dir, Logger: logger.With("component", "python")})
	kernel.Register(srv)

	wantBrowser := slices.Contains(cfg.capabilities, "browser")
	wantVNC := wantBrowser || slices.Contains(cfg.capabilities, "vnc")
	b := browser.New(browser.Config{Browser: wantBrowser, VNC: wantVNC, Logger: logger.With("component", "browser")})
	b.Register(srv)
	b.Start()

	reserved := map[int]string{}
	if _, p, err := net.SplitHostPort(cfg.addr); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			reserved[n] = "it is the agent's own port"
		}
	}
	if wantBrowser {
		reserved[9222] = "Chromium's DevTools port is served at /cdp, with its URLs rewritten"
	}
	if wantVNC {
		reserved[5900] = "the VNC server is served at /vnc/websockify"
	}
	portproxy.New(portproxy.Config{Reserved: reserved, Token: cfg.token, Logger: logger.With("component", "proxy")}).Register(srv)

	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		kernel.Close(ctx)
		b.Stop()
	}
}
