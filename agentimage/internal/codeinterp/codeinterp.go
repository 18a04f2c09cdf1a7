// Package codeinterp serves E2B's code-interpreter API (reference/e2b.md §5) under agentapi.E2BCodePrefix on the
// agent's port: POST /execute answered as E2B's NDJSON stream, code contexts (create, list, restart, delete) and
// GET /health. Contexts run on the agent's own persistent kernels, one process per context: Python on pykernel
// (output streamed as printed, matplotlib figures as PNG results, a trailing value's rich representations),
// JavaScript and TypeScript (run as JavaScript) on nodekernel, R on rkernel where the image has R. The gateway's
// E2B edge forwards port 49999 here with the sandbox-wide env in agentapi.E2BEnvHeader.
package codeinterp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/pykernel"
)

// Defaults of Config.
const (
	DefaultMaxContexts = 16
	// DefaultKeepalive is upstream's: a keepalive line after 5 s without output.
	DefaultKeepalive = 5 * time.Second
)

// Config tunes the service.
type Config struct {
	// Workspace is where E2B's /home/user lives when the image has no such directory.
	Workspace string
	// Env is the kernels' base environment; nil means the agent's. The sandbox-wide env goes on top.
	Env []string
	// Python, Node and Rscript are the interpreters, looked up on PATH; defaults python3, node, Rscript.
	Python, Node, Rscript string
	// MaxContexts bounds the contexts (each is a kernel process); default DefaultMaxContexts.
	MaxContexts int
	// MaxOutput caps each of a Python cell's stdout and stderr; default pykernel's.
	MaxOutput int
	// PythonTimeout bounds a Python execution (the client's own timeout usually ends it first, and a client that
	// leaves interrupts it); default pykernel.MaxTimeout. Node and R cells are bounded by their kernels' maximum.
	PythonTimeout time.Duration
	// Keepalive is the silence after which the stream gets a keepalive line; default DefaultKeepalive.
	Keepalive time.Duration
	Logger    *slog.Logger
}

// Service is the code interpreter of one sandbox.
type Service struct {
	cfg  Config
	ctxs *contexts
	// defaultMu serialises the creation of default contexts.
	defaultMu sync.Mutex
}

// New returns the service; no kernel starts before its context's first execution.
func New(cfg Config) *Service {
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.Node == "" {
		cfg.Node = "node"
	}
	if cfg.Rscript == "" {
		cfg.Rscript = "Rscript"
	}
	if cfg.MaxContexts <= 0 {
		cfg.MaxContexts = DefaultMaxContexts
	}
	if cfg.PythonTimeout <= 0 {
		cfg.PythonTimeout = pykernel.MaxTimeout
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, ctxs: newContexts()}
}

// Routes is what Register needs from the agent's server.
type Routes interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register adds the routes under agentapi.E2BCodePrefix.
func (s *Service) Register(r Routes) {
	p := agentapi.E2BCodePrefix
	r.HandleFunc("GET "+p+"/health", func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, http.StatusOK, "OK")
	})
	r.HandleFunc("POST "+p+"/execute", s.serveExecute)
	r.HandleFunc("POST "+p+"/contexts", s.serveCreate)
	r.HandleFunc("GET "+p+"/contexts", s.serveList)
	r.HandleFunc("POST "+p+"/contexts/{id}/restart", s.serveRestart)
	r.HandleFunc("DELETE "+p+"/contexts/{id}", s.serveDelete)
}

// decode reads a request's body (bounded), parses it with parse, and decodes the sandbox-wide environment the
// gateway sends beside it; every failure is the agent's typed error.
func decode[T any](w http.ResponseWriter, r *http.Request, parse func([]byte) (T, error)) (req T, sandboxEnv map[string]string, err error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return req, nil, agentapi.Errorf(agentapi.CodeTooLarge, "the request body is over %d bytes", maxBodyBytes)
	}
	if req, err = parse(b); err != nil {
		return req, nil, err
	}
	sandboxEnv, err = ParseEnvHeader(r.Header.Get(agentapi.E2BEnvHeader))
	return req, sandboxEnv, err
}

func (s *Service) serveExecute(w http.ResponseWriter, r *http.Request) {
	req, sandboxEnv, err := decode(w, r, ParseExecute)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	var c *codeContext
	if req.ContextID != "" {
		c, err = s.get(req.ContextID)
	} else {
		c, err = s.defaultFor(req.Language, sandboxEnv)
	}
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	s.execute(r.Context(), w, c, req)
}

// execute runs one execution and answers it as E2B's stream: number_of_executions, stdout and stderr as printed,
// the results, the error if any, and end_of_execution last, with keepalives in silences. A client that leaves
// cancels ctx, which interrupts a Python cell (Node and R cells run to their own timeout).
func (s *Service) execute(ctx context.Context, w http.ResponseWriter, c *codeContext, req ExecuteRequest) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	lw := newLineWriter(w)
	_ = lw.send(map[string]string{"type": lineKeepalive}) // headers and a first byte out now, before any wait for the kernel
	stopKeepalive := make(chan struct{})
	go lw.keepalive(s.cfg.Keepalive, stopKeepalive)
	defer close(stopKeepalive)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	_ = lw.send(countLine{Type: lineCount, ExecutionCount: c.count})

	box := newOutbox()
	pumped := make(chan struct{})
	done := make(chan struct{})
	go func() { box.pump(lw, done); close(pumped) }()
	o := c.run.run(ctx, req.Code, req.EnvVars, box.add)
	if o.stdout != "" {
		box.add(lineStdout, []byte(o.stdout))
	}
	if o.stderr != "" {
		box.add(lineStderr, []byte(o.stderr))
	}
	close(done)
	<-pumped
	for _, res := range o.results {
		_ = lw.send(res)
	}
	if o.err != nil {
		_ = lw.send(o.err)
	}
	_ = lw.send(map[string]string{"type": lineEnd})
}

func (s *Service) serveCreate(w http.ResponseWriter, r *http.Request) {
	req, sandboxEnv, err := decode(w, r, ParseCreateContext)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	c, err := s.create(req.Language, req.Cwd, sandboxEnv)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, c)
}

func (s *Service) serveList(w http.ResponseWriter, _ *http.Request) {
	agentapi.WriteJSON(w, http.StatusOK, s.list())
}

func (s *Service) serveRestart(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := CheckContextID(id); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	if err := s.restart(r.Context(), id); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, nil)
}

func (s *Service) serveDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := CheckContextID(id); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	if err := s.remove(id); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, nil)
}
