// Package mcpapi is the gateway's MCP server (Streamable HTTP, served at /mcp on the API site): the service's
// operations as MCP tools for models, with the API's bearer keys and its owner scoping. The tools call the same
// sandboxes/service operations the REST handlers do; this package only translates arguments and answers.
package mcpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Ops is what the tools need of the service's operations (implemented by *service.Service).
type Ops interface {
	Profiles() []sandboxes.Profile
	CreateSandbox(ctx context.Context, p service.Principal, cp service.CreateParams) (sandboxes.Sandbox, error)
	ListSandboxes(ctx context.Context, p service.Principal, opts sandboxes.ListOptions) ([]sandboxes.Sandbox, string, error)
	StopSandbox(ctx context.Context, p service.Principal, id string) error
	DeleteSandbox(ctx context.Context, p service.Principal, id string) error
	RunKernel(ctx context.Context, p service.Principal, id, lang, code string, timeout time.Duration, meta service.ExecMeta) (service.KernelOutput, error)
	RunShell(ctx context.Context, p service.Principal, id string, sp service.ShellParams, meta service.ExecMeta) (service.ShellOutput, error)
	StreamShell(ctx context.Context, p service.Principal, id string, sp service.ShellParams) (io.ReadCloser, error)
	ReadFile(ctx context.Context, p service.Principal, id, path string) ([]byte, error)
	WriteFile(ctx context.Context, p service.Principal, id, path string, content io.Reader) error
	ListDir(ctx context.Context, p service.Principal, id, path string) ([]service.DirEntry, error)
	EditFile(ctx context.Context, p service.Principal, id string, req agentapi.EditRequest) (agentapi.EditResult, error)
	SearchFiles(ctx context.Context, p service.Principal, id string, req agentapi.GrepRequest) (agentapi.GrepResult, error)
	ExportFiles(ctx context.Context, p service.Principal, id string, paths []string) ([]sandboxes.Export, error)
	ImportFile(ctx context.Context, p service.Principal, id string, req service.ImportParams) (service.Imported, error)
	IssueTicket(ctx context.Context, p service.Principal, id, scope string, write bool, ttl time.Duration) (service.Ticket, error)
	Browse(ctx context.Context, p service.Principal, id string, req service.BrowserRequest) (service.BrowserResult, error)
}

// KeyLookup resolves an API key to its principal (the API's key ring).
type KeyLookup interface {
	Lookup(token string) (service.Principal, bool)
}

var (
	_ Ops      = (*service.Service)(nil)
	_ SkillOps = (*service.Service)(nil)
)

// Options tunes the server.
type Options struct {
	Version string
	Logger  *slog.Logger
	// SessionTimeout closes sessions idle this long (default 24h); their ids then answer 404 and clients start over.
	SessionTimeout time.Duration
	// ProgressEvery is the least interval between progress notifications of run_long_command (default 1s).
	ProgressEvery time.Duration
}

// Server is the gateway's MCP server. Its sessions live as long as the Server, which the Caddy glue keeps across
// config reloads; a reload only swaps the operations (SetOps).
type Server struct {
	opts    Options
	ops     atomic.Pointer[opsHolder]
	server  *mcp.Server
	handler http.Handler
}

type opsHolder struct {
	ops  Ops
	keys KeyLookup
}

// New builds the server with every tool registered. Call SetOps before serving.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 24 * time.Hour
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = time.Second
	}
	s := &Server{opts: opts}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "sandgate", Title: "sandgate sandboxes", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       opts.Logger,
	})
	s.addSandboxTools()
	s.addExecTools()
	s.addFileTools()
	s.addBrowserTools()
	s.addHistoryTools() // tools_history.go
	s.addSkillTools()   // tools_skills.go
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server }, &mcp.StreamableHTTPOptions{
		SessionTimeout: opts.SessionTimeout,
		Logger:         opts.Logger,
	})
	s.handler = auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return s
}

const instructions = `Sandboxes are isolated Linux containers with a persistent workspace (/workspace). ` +
	`Create one with create_sandbox (it returns its id), then pass sandbox_id to the other tools. ` +
	`Paths are relative to the workspace. run_code keeps variables between calls (one kernel per language). ` +
	`Delete sandboxes you no longer need with delete_sandbox.`

// SetOps points the tools at the operations and the API keys of the current configuration.
func (s *Server) SetOps(o Ops, keys KeyLookup) { s.ops.Store(&opsHolder{ops: o, keys: keys}) }

// Handler serves Streamable HTTP (POST, GET and DELETE on one path), after checking the API key. Unknown session
// ids get 404, so clients initialise again.
func (s *Server) Handler() http.Handler { return s.handler }

// MCP is the underlying server (for in-process transports in tests).
func (s *Server) MCP() *mcp.Server { return s.server }

// Extra keys of the TokenInfo a verified request carries.
const (
	extraPrincipal = "sandgate.principal"
	extraBaseURL   = "sandgate.base_url"
)

// verify checks a bearer key against the API's key ring. The session is bound to the key's owner (and admin scope),
// so a session id is useless with another owner's key.
func (s *Server) verify(_ context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	h := s.ops.Load()
	if h == nil || h.keys == nil {
		return nil, fmt.Errorf("the MCP server is not configured yet")
	}
	p, ok := h.keys.Lookup(token)
	if !ok {
		return nil, fmt.Errorf("%w: the API key is not valid", auth.ErrInvalidToken)
	}
	user := "owner:" + p.Owner
	if p.Admin {
		user = "admin:" + p.Owner
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return &auth.TokenInfo{UserID: user, Extra: map[string]any{extraPrincipal: p, extraBaseURL: scheme + "://" + r.Host}}, nil
}

// caller is who called a tool, and what with.
type caller struct {
	p       service.Principal
	ops     Ops
	baseURL string
}

func (s *Server) caller(req *mcp.CallToolRequest) (caller, error) {
	h := s.ops.Load()
	if h == nil {
		return caller{}, &service.Error{Code: service.CodeInternal, Message: "the MCP server is not configured yet"}
	}
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return caller{}, &service.Error{Code: service.CodeUnauthorized, Message: "Missing API key"}
	}
	p, ok := req.Extra.TokenInfo.Extra[extraPrincipal].(service.Principal)
	if !ok {
		return caller{}, &service.Error{Code: service.CodeUnauthorized, Message: "Invalid API key"}
	}
	base, _ := req.Extra.TokenInfo.Extra[extraBaseURL].(string)
	return caller{p: p, ops: h.ops, baseURL: base}, nil
}

// validator is implemented by every tool's arguments: checks beyond what the JSON schema says.
type validator interface{ validate() error }

// tool registers a tool whose input schema comes from In. Bad arguments, a missing principal and every failure of
// the operation become tool errors (isError with our typed code), never protocol errors.
func tool[In validator](s *Server, t *mcp.Tool, run func(ctx context.Context, c caller, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, error)) {
	mcp.AddTool(s.server, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		if err := in.validate(); err != nil {
			return toolError(err), nil, nil
		}
		c, err := s.caller(req)
		if err != nil {
			return toolError(err), nil, nil
		}
		res, err := run(ctx, c, req, in)
		if err != nil {
			return toolError(err), nil, nil
		}
		return res, nil, nil
	})
}

// optionalTool registers a tool whose run needs an optional part O of the caller's operations (the history tools'
// HistoryOps, the skills tools' SkillOps); a configuration whose operations lack it answers capability_not_supported
// with missing. run's result is answered as JSON.
func optionalTool[O any, In validator](s *Server, t *mcp.Tool, missing string, run func(ctx context.Context, o O, p service.Principal, in In) (any, error)) {
	tool(s, t, func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, error) {
		o, ok := c.ops.(O)
		if !ok {
			return nil, service.Errorf(service.CodeCapability, "%s", missing)
		}
		v, err := run(ctx, o, c.p, in)
		if err != nil {
			return nil, err
		}
		return jsonResult(v)
	})
}
