package opensandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Keys resolves an API key to its principal: the REST API's keys, so one key works on both APIs (*service.KeyRing).
type Keys interface {
	Lookup(key string) (service.Principal, bool)
}

// Forwarder sends an admitted proxy request, already pointed at the agent's path, to the sandbox's agent at t with
// t.Token as the agent credential. The Caddy glue hands it to reverse_proxy; DirectForwarder serves without Caddy.
type Forwarder interface {
	Forward(w http.ResponseWriter, r *http.Request, t sandboxes.Target)
}

// Config wires the handler.
type Config struct {
	// Service is the one road into the core: every lifecycle call and owner check goes through it.
	Service *service.Service
	Keys    Keys
	// EndpointHost is the host[:port][/prefix] endpoints name (no scheme); empty uses the request's Host.
	EndpointHost string
	// MaxTimeout caps a create's timeout; 0: no cap beyond the Manager's.
	MaxTimeout time.Duration
	// StartTimeout bounds a proxy request's wait for an idle sandbox to start; 0 means 60s.
	StartTimeout time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
}

// Handler serves the dialect at / and /v1.
type Handler struct {
	cfg    Config
	mux    *http.ServeMux
	routes []route
}

type route struct {
	method, path string
	h            func(http.ResponseWriter, *http.Request, service.Principal)
}

// New builds the handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	S := "/sandboxes/{id}"
	h.routes = []route{
		{"POST", "/sandboxes", h.create},
		{"GET", "/sandboxes", h.list},
		{"GET", S, h.get},
		{"DELETE", S, h.delete},
		{"PATCH", S + "/metadata", h.patchMetadata},
		{"POST", S + "/pause", h.pause},
		{"POST", S + "/resume", h.resume},
		{"POST", S + "/renew-expiration", h.renew},
		{"GET", S + "/endpoints/{port}", h.endpoint},
		{"POST", "/metrics/events", h.metricsEvent},
	}
	// OpenSandbox's snapshots are not served (sandgate's own snapshots are the REST API's): a clear 501, not a 404.
	for _, path := range []string{"/snapshots", "/snapshots/{sid}", S + "/snapshots"} {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			h.routes = append(h.routes, route{m, path, h.snapshotsUnsupported})
		}
	}
	for _, prefix := range []string{"", "/v1"} {
		for _, rt := range h.routes {
			h.mux.HandleFunc(rt.method+" "+prefix+rt.path, func(w http.ResponseWriter, r *http.Request) {
				p, err := h.authenticate(r)
				if err != nil {
					writeError(w, err)
					return
				}
				rt.h(w, r, p)
			})
		}
	}
	return h
}

// requestIDHeader is answered on every response; a client's own id is echoed.
const requestIDHeader = "X-Request-ID"

// ServeHTTP serves the API and the proxy with DirectForwarder.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.Serve(w, r, DirectForwarder{})
}

// Serve serves one request; proxy requests go to fwd once admitted.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, fwd Forwarder) {
	rid := r.Header.Get(requestIDHeader)
	if rid == "" || len(rid) > 128 || strings.ContainsAny(rid, "\r\n") {
		rid = newRequestID()
	}
	w.Header().Set(requestIDHeader, rid)
	if r.URL.Path == "/health" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("OK"))
		return
	}
	if pa, ok := parseProxyPath(r.URL.EscapedPath()); ok {
		h.proxy(w, r, pa, fwd)
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		for _, m := range []string{"GET", "POST", "PATCH", "DELETE"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := h.mux.Handler(probe); p != "" {
				writeError(w, errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method %s is not allowed here", r.Method))
				return
			}
		}
		writeError(w, errorf(http.StatusNotFound, CodeNotFound, "no such route: %s", r.URL.Path))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// APIKeyHeader carries the API key, as OpenSandbox's SDKs send it.
const APIKeyHeader = "OPEN-SANDBOX-API-KEY"

func (h *Handler) authenticate(r *http.Request) (service.Principal, *Error) {
	key := strings.TrimSpace(r.Header.Get(APIKeyHeader))
	if key == "" {
		return service.Principal{}, errorf(http.StatusUnauthorized, CodeMissingAPIKey, "the %s header is required", APIKeyHeader)
	}
	if h.cfg.Keys == nil {
		return service.Principal{}, errorf(http.StatusUnauthorized, CodeInvalidAPIKey, "invalid API key")
	}
	p, ok := h.cfg.Keys.Lookup(key)
	if !ok {
		return service.Principal{}, errorf(http.StatusUnauthorized, CodeInvalidAPIKey, "invalid API key")
	}
	return p, nil
}

// visible finds a sandbox the principal may see (service.Visible): another owner's sandbox answers exactly as a
// missing one.
func (h *Handler) visible(ctx context.Context, p service.Principal, id string) (*sandboxes.Sandbox, *Error) {
	sb, err := h.cfg.Service.Visible(ctx, p, id)
	if err != nil {
		if service.AsError(err).Code == service.CodeNotFound {
			return nil, notFound(id)
		}
		return nil, toError(err)
	}
	return &sb, nil
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	return hex.EncodeToString(b)
}

// metricsEvent accepts the SDKs' create-latency reports (POST /metrics/events) and drops them: the gateway
// measures creates itself (lifecycle events), so a client's figures add nothing.
func (h *Handler) metricsEvent(w http.ResponseWriter, _ *http.Request, _ service.Principal) {
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) snapshotsUnsupported(w http.ResponseWriter, _ *http.Request, _ service.Principal) {
	writeError(w, errorf(http.StatusNotImplemented, CodeAPINotSupported, "OpenSandbox snapshots are not supported by this gateway"))
}
