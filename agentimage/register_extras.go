package main

import (
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/internal/browser"
	"github.com/sandgate/sandgate/agentimage/internal/codeinterp"
	"github.com/sandgate/sandgate/agentimage/internal/listening"
	"github.com/sandgate/sandgate/agentimage/internal/portproxy"
	"github.com/sandgate/sandgate/agentimage/internal/pykernel"
	"github.com/sandgate/sandgate/agentimage/internal/server"
)

// extras are the agent's optional capabilities: the Python kernel, E2B's code interpreter, the browser, the port
// proxy and the listing of listening ports.
type extras struct {
	kernel  *pykernel.Kernel
	code    *codeinterp.Service
	browser *browser.Browser
}

// AddMCPTools registers python_exec and, with a browser, the browser_* tools on the agent's MCP server.
func (e *extras) AddMCPTools(s *mcp.Server) {
	e.kernel.AddMCPTools(s)
	e.browser.AddMCPTools(s)
}

// Close stops the kernels and the browser's processes.
func (e *extras) Close() {
	e.kernel.Close()
	e.code.Close()
	e.browser.Stop()
}

// registerExtras adds the Python kernel, the browser (CDP, VNC, REST helpers), the port proxy and GET /v1/ports to
// srv, starting the browser's processes when the profile asks for them.
func registerExtras(srv *server.Server, cfg config, logger *slog.Logger) *extras {
	dir := cfg.workspace
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = ""
	}
	kernel := pykernel.New(pykernel.Config{Dir: dir, Logger: logger.With("component", "python")})
	kernel.Register(srv)
	// E2B's code interpreter (under agentapi.E2BCodePrefix): contexts on kernels of their own, E2B's /home/user on
	// the workspace.
	code := codeinterp.New(codeinterp.Config{Workspace: cfg.workspace, Logger: logger.With("component", "e2b-code")})
	code.Register(srv)

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
	// GET /v1/ports tells the gateway which ports serve something, marked with the proxy's reservations, so it can
	// approve a certificate for {port}-{id}.{base} only where the proxy would reach a listener.
	listening.New(listening.Config{Reserved: reserved, Logger: logger.With("component", "ports")}).Register(srv)

	return &extras{kernel: kernel, code: code, browser: b}
}
