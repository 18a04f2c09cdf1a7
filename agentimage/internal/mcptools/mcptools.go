// Package mcptools serves the agent's tools over MCP (Streamable HTTP): bash, read, write, edit, glob and grep on
// the same services as the REST API. Other capabilities add their tools with Add or AddTool on the same server.
package mcptools

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/internal/files"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

// Deps are the services the core tools use.
type Deps struct {
	Procs   *process.Manager
	Files   *files.Service
	Version string
	Logger  *slog.Logger
	// ProgressEvery is the interval of progress notifications during a long bash call (default 5s).
	ProgressEvery time.Duration
	// SessionTimeout closes MCP sessions idle this long (default 24h; clients get 404 and start over).
	SessionTimeout time.Duration
}

// Server is the agent's MCP server.
type Server struct {
	deps    Deps
	server  *mcp.Server
	handler http.Handler
}

// Registrar adds tools to the MCP server (how optional capabilities plug in: a method value such as
// kernel.AddMCPTools fits).
type Registrar func(*mcp.Server)

// New returns a server with the core tools registered.
func New(d Deps) *Server {
	if d.ProgressEvery <= 0 {
		d.ProgressEvery = 5 * time.Second
	}
	if d.SessionTimeout <= 0 {
		d.SessionTimeout = 24 * time.Hour
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	s := &Server{deps: d}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "sandgate-agent", Version: d.Version}, &mcp.ServerOptions{
		Instructions: "Tools of one sandbox. Paths are relative to the workspace root; bash runs there by default.",
		Logger:       d.Logger,
	})
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server }, &mcp.StreamableHTTPOptions{
		SessionTimeout: d.SessionTimeout,
		Logger:         d.Logger,
	})
	s.addCoreTools()
	return s
}

// MCP is the underlying server, for mcp.AddTool and friends.
func (s *Server) MCP() *mcp.Server { return s.server }

// AddTool registers a tool with an untyped handler.
func (s *Server) AddTool(t *mcp.Tool, h mcp.ToolHandler) { s.server.AddTool(t, h) }

// Add registers a typed tool: the input schema is inferred from In, and Out (if not any) becomes structured output.
func Add[In, Out any](s *Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	mcp.AddTool(s.server, t, h)
}

// Handler serves Streamable HTTP (POST, GET and DELETE on one path). Unknown session ids get 404.
func (s *Server) Handler() http.Handler { return s.handler }
