package bayapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Config wires the handler to its collaborators.
type Config struct {
	// Service runs the operations; the handler translates Bay's requests and answers around it.
	Service *service.Service
	Keys    *service.KeyRing
	// AllowAnonymous lets calls without a token through, owned by X-Owner or "default" (Bay's allow_anonymous).
	AllowAnonymous bool
	// MaxSpooledUploads and MaxSpooledUploadsPerOwner bound uploads spooled to the temp dir at once (a file part
	// before its path); 0 means DefaultMaxSpooledUploads and DefaultMaxSpooledUploadsPerOwner.
	MaxSpooledUploads         int
	MaxSpooledUploadsPerOwner int
	Version                   string
	Logger                    *slog.Logger
	Now                       func() time.Time
}

// Handler serves the API.
type Handler struct {
	cfg    Config
	svc    *service.Service
	mux    *http.ServeMux
	routes []route
	idem   *idempotencyCache
	spool  *spoolSlots
}

// route is one API operation; the table drives the mux and /v1/openapi.json alike.
type route struct {
	method, path string
	summary      string
	public       bool // no authentication (Bay: /health and GET /v1/profiles)
	bay          bool // part of Bay's API (false: our addition)
	h            func(http.ResponseWriter, *http.Request, service.Principal)
}

// New builds the handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Keys == nil {
		cfg.Keys, _ = service.NewKeyRing(nil)
	}
	h := &Handler{cfg: cfg, svc: cfg.Service, mux: http.NewServeMux(), idem: newIdempotencyCache(time.Hour, cfg.Now),
		spool: newSpoolSlots(cfg.MaxSpooledUploads, cfg.MaxSpooledUploadsPerOwner)}
	h.routes = h.table()
	for _, rt := range h.routes {
		h.mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			var p service.Principal
			if !rt.public {
				var err error
				if p, err = h.authenticate(r); err != nil {
					writeError(w, r, err)
					return
				}
			}
			rt.h(w, r, p)
		})
	}
	return h
}

func (h *Handler) table() []route {
	S := "/v1/sandboxes/{id}"
	rs := []route{
		{"GET", "/health", "Liveness and version", true, true, h.health},
		{"GET", "/v1/profiles", "List sandbox profiles", true, true, h.listProfiles},
		{"POST", "/v1/sandboxes", "Create a sandbox (Idempotency-Key honoured)", false, true, h.createSandbox},
		{"GET", "/v1/sandboxes", "List the caller's sandboxes", false, true, h.listSandboxes},
		{"GET", S, "Get a sandbox", false, true, h.getSandbox},
		{"DELETE", S, "Delete a sandbox and its managed cargo (idempotent)", false, true, h.deleteSandbox},
		{"POST", S + "/stop", "Stop the sandbox's compute, keeping its cargo", false, true, h.stopSandbox},
		{"POST", S + "/keepalive", "Push the idle deadline without starting compute", false, true, h.keepalive},
		{"POST", S + "/extend_ttl", "Extend the hard lifetime (Idempotency-Key honoured)", false, true, h.extendTTL},
		{"POST", S + "/python/exec", "Run Python in the sandbox's persistent kernel", false, true, h.pythonExec},
		{"POST", S + "/shell/exec", "Run a shell command", false, true, h.shellExec},
		{"POST", S + "/browser/exec", "Run one browser command", false, true, h.browserExec},
		{"POST", S + "/browser/exec_batch", "Run browser commands in order", false, true, h.browserBatch},
		{"GET", S + "/browser/traces/{ref}", "A trace kept by a browser exec or exec_batch (include_trace or learn)", false, true, h.browserTrace},
		{"GET", S + "/filesystem/files", "Read a text file", false, true, h.readFile},
		{"PUT", S + "/filesystem/files", "Write a text file", false, true, h.writeFile},
		{"DELETE", S + "/filesystem/files", "Delete a file or directory", false, true, h.deleteFile},
		{"GET", S + "/filesystem/directories", "List a directory", false, true, h.listDir},
		{"POST", S + "/filesystem/upload", "Upload a file (multipart: file, path), streamed", false, true, h.upload},
		{"GET", S + "/filesystem/download", "Download a file (Range supported)", false, true, h.download},
		{"GET", S + "/history", "List execution history", false, true, h.listHistory},
		{"GET", S + "/history/last", "The latest execution", false, true, h.lastHistory},
		{"GET", S + "/history/{eid}", "One execution", false, true, h.getHistory},
		{"PATCH", S + "/history/{eid}", "Annotate an execution (description, tags, notes)", false, true, h.patchHistory},
		{"POST", "/v1/cargos", "Create a cargo (workspace volume; Idempotency-Key honoured)", false, true, h.createCargo},
		{"GET", "/v1/cargos", "List cargos", false, true, h.listCargos},
		{"GET", "/v1/cargos/{cid}", "Get a cargo", false, true, h.getCargo},
		{"DELETE", "/v1/cargos/{cid}", "Delete a cargo (409 while in use)", false, true, h.deleteCargo},
		{"POST", "/v1/admin/gc/run", "Run a garbage collection now and report it by task (admin keys only)", false, true, h.adminGCRun},
		{"GET", "/v1/admin/gc/status", "The garbage collector's settings and whether a pass runs (admin keys only)", false, true, h.adminGCStatus},
		// Our additions.
		{"POST", S + "/shell/exec/stream", "Run a shell command, streaming output as SSE", false, false, h.execStream},
		{"GET", S + "/processes", "List processes", false, false, h.listProcesses},
		{"GET", S + "/processes/{pid}/output", "Resume a process's output from an offset (SSE)", false, false, h.processOutput},
		{"POST", S + "/processes/{pid}/signal", "Signal a process group", false, false, h.signalProcess},
		{"POST", S + "/pty", "Open a PTY session", false, false, h.createPTY},
		{"POST", S + "/tickets", "Issue a short-lived one-time ticket for a browser URL", false, false, h.createTicket},
		{"GET", "/v1/openapi.json", "This API's OpenAPI document", true, false, h.openapi},
	}
	rs = append(rs, h.transferRoutes()...)  // files_transfer.go
	rs = append(rs, h.lifecycleRoutes()...) // lifecycle_ops.go
	rs = append(rs, h.skillRoutes()...)     // skills.go
	// Bay routes sandgate does not implement answer a clear capability_not_supported instead of a bare 404, so a
	// client (AstrBot's Neo skill tools) reports why. docs/api.md explains each decision.
	for _, u := range unsupported {
		for _, m := range []string{"GET", "POST", "PATCH", "DELETE"} {
			rs = append(rs, route{m, u.path, "Not supported by sandgate: " + u.why, false, true,
				func(w http.ResponseWriter, r *http.Request, _ service.Principal) {
					writeError(w, r, service.Errorf(service.CodeCapability, "%s is not supported by this gateway: %s", u.feature, u.why).
						With("capability", u.feature).With("available", []string{}))
				}})
		}
	}
	return rs
}

var unsupported = []struct{ path, feature, why string }{
	{"/v1/admin/{rest...}", "admin", "of Bay's admin API only POST /v1/admin/gc/run and GET /v1/admin/gc/status are served; collection runs continuously in the lifecycle manager, and Caddy's admin API (/sandboxes) shows it"},
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

// ServeHTTP echoes or generates X-Request-Id and dispatches; unknown routes get Bay's envelope, not mux text.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := r.Header.Get("X-Request-Id")
	if rid == "" || len(rid) > 128 {
		rid = service.NewID("req-")
	}
	w.Header().Set("X-Request-Id", rid)
	ctx := context.WithValue(r.Context(), requestIDKey, rid)
	r = r.WithContext(context.WithValue(ctx, loggerKey, h.cfg.Logger))
	if _, pattern := h.mux.Handler(r); pattern == "" {
		// Tell a wrong method from an unknown path, as FastAPI does (405 vs 404).
		for _, rt := range h.routes {
			probe := r.Clone(r.Context())
			probe.Method = rt.method
			if _, p := h.mux.Handler(probe); p != "" {
				writeError(w, r, service.Errorf(CodeMethodNotAllowed, "Method Not Allowed"))
				return
			}
		}
		writeError(w, r, service.Errorf(service.CodeNotFound, "Not Found: %s", r.URL.Path))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Owns reports whether this handler serves the request's path (so the Caddy glue can pass other paths on).
func (h *Handler) Owns(r *http.Request) bool {
	p := r.URL.Path
	return p == "/health" || p == "/v1" || strings.HasPrefix(p, "/v1/")
}

func requestID(r *http.Request) string {
	if v, ok := r.Context().Value(requestIDKey).(string); ok {
		return v
	}
	return ""
}

func (h *Handler) health(w http.ResponseWriter, _ *http.Request, _ service.Principal) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": h.cfg.Version})
}

// decodeOrFail reports the fields' issues as FastAPI's 422 and returns false when there are any.
func decodeOrFail(w http.ResponseWriter, f *fields) bool {
	if err := f.err(); err != nil {
		writeValidation(w, err.(*validationError))
		return false
	}
	return true
}
