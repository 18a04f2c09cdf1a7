// Package server is the agent's HTTP front: one mux, token authentication on every route but /health, typed
// errors, HTTP/1.1 and cleartext HTTP/2 on one port. Capabilities register their routes on it.
package server

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Config is what the server needs to know.
type Config struct {
	// Token verifies the per-sandbox secret (the agent knows only its digest). The zero value refuses every
	// authenticated route (fail closed).
	Token   agentapi.TokenCheck
	Version string
	Logger  *slog.Logger
}

// Server routes the agent's API.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	started time.Time
}

// New returns a server with GET /health registered.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), started: time.Now()}
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, http.StatusOK, agentapi.Health{Status: agentapi.StartupReady, Version: cfg.Version})
	})
	return s
}

// Started is when the server was created, for uptime.
func (s *Server) Started() time.Time { return s.started }

// Handle registers h for pattern (net/http ServeMux syntax) behind token authentication.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.authenticate(h))
}

// HandleFunc is Handle for a function.
func (s *Server) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	s.Handle(pattern, http.HandlerFunc(h))
}

// Handler is the root handler: unknown routes get a typed 404 instead of the mux's text.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := s.mux.Handler(r); pattern == "" {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// NewHTTPServer returns an http.Server for addr speaking HTTP/1.1 and h2c, with no whole-request timeouts (exec
// streams and WebSockets are long) but bounded header reads.
func (s *Server) NewHTTPServer(addr string) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           s.Handler(),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       10 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
}

func (s *Server) authenticate(h http.Handler) http.Handler {
	check := s.cfg.Token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !check.Match(requestToken(r)) {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeUnauthorized, "missing or wrong agent token"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// requestToken finds the token in a request: the X-Sandgate-Token header, an Authorization bearer, or (for browser
// WebSockets, which cannot set headers) the access_token query parameter.
func requestToken(r *http.Request) string {
	if t := r.Header.Get(agentapi.TokenHeader); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return r.URL.Query().Get("access_token")
}
