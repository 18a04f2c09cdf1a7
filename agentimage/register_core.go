package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/api"
	"github.com/sandgate/sandgate/agentimage/internal/envd"
	"github.com/sandgate/sandgate/agentimage/internal/execd"
	"github.com/sandgate/sandgate/agentimage/internal/files"
	"github.com/sandgate/sandgate/agentimage/internal/mcptools"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/pty"
	"github.com/sandgate/sandgate/agentimage/internal/server"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// core is the agent's core capabilities: exec and processes, PTY sessions, files, fs helpers and MCP.
type core struct {
	Root  *workspace.Root
	Procs *process.Manager
	PTYs  *pty.Manager
	Files *files.Service
	// MCP is the MCP server at /mcp; other capabilities add their tools to it.
	MCP *mcptools.Server
	// Envd is E2B's envd under agentapi.E2BEnvdPrefix, with its own process manager (EnvdProcs).
	Envd      *envd.Service
	EnvdProcs *process.Manager
}

// Close kills what still runs (PTY sessions, processes).
func (c *core) Close() {
	c.PTYs.Close()
	c.Procs.Close()
	c.Envd.Close()
	c.EnvdProcs.Close()
}

// registerCore builds the core services and routes them on srv, /mcp included. tools add MCP tools of other
// capabilities (e.g. registerCore(srv, cfg, logger, extras.AddMCPTools)). SANDGATE_MAX_FILE_BYTES caps one written
// file.
func registerCore(srv *server.Server, cfg config, logger *slog.Logger, tools ...mcptools.Registrar) (*core, error) {
	if err := os.MkdirAll(cfg.workspace, 0o755); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.workspace, err)
	}
	root, err := workspace.New(cfg.workspace)
	if err != nil {
		return nil, err
	}
	maxFile := int64(agentapi.DefaultMaxFileBytes)
	if v := os.Getenv(agentapi.EnvMaxFileBytes); v != "" {
		if maxFile, err = strconv.ParseInt(v, 10, 64); err != nil || maxFile <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive byte count", agentapi.EnvMaxFileBytes, v)
		}
	}
	c := &core{Root: root, Files: files.New(root, maxFile)}
	c.Procs = process.NewManager(process.Config{Logger: logger})
	c.PTYs = pty.NewManager(c.Procs)
	api.Register(srv, api.Deps{Root: root, Procs: c.Procs, PTYs: c.PTYs, Files: c.Files, Logger: logger})
	registerExecd(srv, root, maxFile, c.Procs, logger)
	c.Envd, c.EnvdProcs = registerEnvd(srv, root, maxFile, logger)
	c.MCP = mcptools.New(mcptools.Deps{Procs: c.Procs, Files: c.Files, Version: version, Logger: logger})
	for _, add := range tools {
		add(c.MCP.MCP())
	}
	srv.Handle("/mcp", c.MCP.Handler())
	return c, nil
}

// registerExecd serves OpenSandbox's execd API under /execd/ (the SDK FastGPT uses). Its paths may name the
// user's home too, where FastGPT writes package-mirror files; everything else stays refused.
func registerExecd(srv *server.Server, root *workspace.Root, maxFile int64, procs *process.Manager, logger *slog.Logger) {
	home := os.Getenv("HOME")
	execRoot := root
	if home != "" {
		if r, err := root.WithAlso(home); err == nil {
			execRoot = r
		} else {
			logger.Warn("execd API: paths in HOME are refused", "home", home, "error", err)
			home = ""
		}
	}
	execd.Register(srv, execd.Deps{Files: files.New(execRoot, maxFile), Procs: procs, Home: home, Logger: logger.With("component", "execd")})
}

// envdRingBytes is the output an E2B process may get ahead of its stream before bytes are lost: E2B's clients
// cannot resume from an offset, so envd's processes keep larger rings than the agent's own (which replay).
const envdRingBytes = 16 << 20

// registerEnvd serves E2B's envd under agentapi.E2BEnvdPrefix. Its processes run in a process manager of their own
// (E2B's List shows only them); E2B's /home/user is the workspace, and processes see it under that name when the
// image links /home/user to the workspace (agentimage/Dockerfile).
func registerEnvd(srv *server.Server, root *workspace.Root, maxFile int64, logger *slog.Logger) (*envd.Service, *process.Manager) {
	log := logger.With("component", "envd")
	procs := process.NewManager(process.Config{Logger: log, RingBytes: envdRingBytes})
	alias := ""
	if real, err := filepath.EvalSymlinks(envd.HomeDir); err == nil && real == root.Dir() {
		alias = envd.HomeDir
	}
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	svc := envd.New(envd.Deps{Root: root, Procs: procs, MaxFileBytes: maxFile, HomeAlias: alias, SandboxUser: name, Logger: log})
	srv.Handle(agentapi.E2BEnvdPrefix+"/", http.StripPrefix(agentapi.E2BEnvdPrefix, svc.Handler()))
	return svc, procs
}
