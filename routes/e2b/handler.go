package e2b

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Keys resolves an API key to its principal: the REST API's key ring, so one key and one owner work on every
// dialect.
type Keys interface {
	Lookup(key string) (service.Principal, bool)
}

// Config wires the control plane and the edge.
type Config struct {
	Service *service.Service
	Keys    Keys
	// Templates maps E2B template names onto profile ids (`template <name> <profile>`).
	Templates map[string]string
	// Domain is the sandbox domain the create answers name (E2B_DOMAIN: host[:port] of the content origin); ""
	// answers null, and the SDK uses its own E2B_DOMAIN.
	Domain string
	// Prefix is the path the control plane is mounted under ("/e2b" for E2B_API_URL=https://host/e2b).
	Prefix string
	// MaxTimeout caps a sandbox's timeout; 0: no cap beyond the Manager's.
	MaxTimeout time.Duration
	Logger     *slog.Logger
	Now        func() time.Time
}

// APIKeyHeader carries the key (the SDK spells it X-API-KEY; header names are case-insensitive).
const APIKeyHeader = "X-API-Key"

// Handler serves E2B's control plane.
type Handler struct {
	cfg Config
	svc *service.Service
	mux *http.ServeMux
}

type route struct {
	method, path string
	h            func(http.ResponseWriter, *http.Request, service.Principal)
}

// New builds the control plane.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	h := &Handler{cfg: cfg, svc: cfg.Service, mux: http.NewServeMux()}
	S := "/sandboxes/{id}"
	routes := []route{
		{"POST", "/sandboxes", h.create},
		{"POST", "/v2/sandboxes", h.create},
		{"GET", "/sandboxes", h.list},
		{"GET", "/v2/sandboxes", h.list},
		{"GET", S, h.get},
		{"DELETE", S, h.kill},
		{"POST", S + "/timeout", h.setTimeout},
		{"POST", S + "/refreshes", h.refresh},
		{"POST", S + "/pause", h.pause},
		{"POST", S + "/resume", h.connect},
		{"POST", S + "/connect", h.connect},
		{"POST", "/v2" + S + "/connect", h.connect},
		{"GET", S + "/metrics", h.metrics},
		{"GET", "/sandboxes/metrics", h.metricsMany},
		{"GET", S + "/logs", h.logs},
		{"GET", "/v2" + S + "/logs", h.logs},
		{"PUT", S + "/network", h.updateNetwork},
		{"POST", S + "/snapshots", h.createSnapshot},
		{"GET", "/snapshots", h.listSnapshots},
		{"DELETE", "/templates/{snapshot}", h.deleteSnapshot},
		{"POST", S + "/fork", h.fork},
	}
	for _, rt := range routes {
		h.mux.HandleFunc(rt.method+" "+cfg.Prefix+rt.path, func(w http.ResponseWriter, r *http.Request) {
			p, e := h.authenticate(r)
			if e != nil {
				writeError(w, e)
				return
			}
			rt.h(w, r, p)
		})
	}
	h.mux.HandleFunc("GET "+cfg.Prefix+"/health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	return h
}

// ServeHTTP serves the control plane; a path it does not know is E2B's 404 (405 for a known path).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern == "" {
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := h.mux.Handler(probe); p != "" {
				writeError(w, errorf(http.StatusMethodNotAllowed, "method %s is not allowed here", r.Method))
				return
			}
		}
		writeError(w, errorf(http.StatusNotFound, "no such route: %s", r.URL.Path))
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) authenticate(r *http.Request) (service.Principal, *Error) {
	key := strings.TrimSpace(r.Header.Get(APIKeyHeader))
	if key == "" {
		return service.Principal{}, errorf(http.StatusUnauthorized, "the %s header is required", APIKeyHeader)
	}
	if h.cfg.Keys == nil {
		return service.Principal{}, errorf(http.StatusUnauthorized, "invalid API key")
	}
	p, ok := h.cfg.Keys.Lookup(key)
	if !ok {
		return service.Principal{}, errorf(http.StatusUnauthorized, "invalid API key")
	}
	return p, nil
}
