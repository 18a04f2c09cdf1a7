// Package api is the agent's HTTP surface for its core services: thin net/http handlers that decode requests,
// call process, pty and files, and answer JSON, server-sent events or WebSocket frames with typed errors.
package api

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/files"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/pty"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// Mux is where routes go (the agent's server, which adds token authentication).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Deps are the services behind the handlers.
type Deps struct {
	Root   *workspace.Root
	Procs  *process.Manager
	PTYs   *pty.Manager
	Files  *files.Service
	Logger *slog.Logger
	// Keepalive is the silence after which exec streams send a keepalive event (default 15s).
	Keepalive time.Duration
	// WSPing is the interval of WebSocket pings on PTY connections (default 20s).
	WSPing time.Duration
}

// API holds the handlers.
type API struct {
	Deps
}

// Register adds the exec, process, PTY, files and fs routes to mux.
func Register(mux Mux, d Deps) *API {
	if d.Keepalive <= 0 {
		d.Keepalive = 15 * time.Second
	}
	if d.WSPing <= 0 {
		d.WSPing = 20 * time.Second
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	a := &API{Deps: d}
	h := func(pattern string, f func(http.ResponseWriter, *http.Request)) {
		mux.Handle(pattern, http.HandlerFunc(f))
	}

	h("POST /v1/exec", a.exec)
	h("GET /v1/processes", a.listProcesses)
	h("GET /v1/processes/{id}", a.getProcess)
	h("GET /v1/processes/{id}/events", a.processEvents)
	h("POST /v1/processes/{id}/stdin", a.processStdin)
	h("POST /v1/processes/{id}/signal", a.processSignal)
	h("DELETE /v1/processes/{id}", a.killProcess)

	h("POST /v1/pty", a.createPTY)
	h("GET /v1/pty", a.listPTY)
	h("GET /v1/pty/{id}", a.getPTY)
	h("DELETE /v1/pty/{id}", a.deletePTY)
	h("GET /v1/pty/{id}/ws", a.ptyWebSocket)

	h("GET /v1/files", a.download)
	h("PUT /v1/files", a.upload)
	h("POST /v1/files/upload", a.uploadMultipart)

	h("POST /v1/fs/stat", a.fsStat)
	h("POST /v1/fs/list", a.fsList)
	h("POST /v1/fs/mkdir", a.fsMkdir)
	h("POST /v1/fs/move", a.fsMove)
	h("POST /v1/fs/copy", a.fsCopy)
	h("POST /v1/fs/remove", a.fsRemove)
	h("POST /v1/fs/read", a.fsRead)
	h("POST /v1/fs/write", a.fsWrite)
	h("POST /v1/fs/edit", a.fsEdit)
	h("POST /v1/fs/grep", a.fsGrep)
	h("POST /v1/fs/glob", a.fsGlob)
	return a
}

// maxJSONBody caps JSON request bodies (fs/write carries whole files; PUT /v1/files is for big ones).
const maxJSONBody = 64 << 20

// decode reads a JSON body into v, refusing unknown fields so a misspelt option is an error, not a silent default.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return agentapi.Errorf(agentapi.CodeTooLarge, "request body over %d bytes (upload files with PUT /v1/files)", maxJSONBody)
		}
		if errors.Is(err, io.EOF) {
			return agentapi.Errorf(agentapi.CodeInvalidRequest, "request body must be a JSON object")
		}
		return agentapi.Errorf(agentapi.CodeInvalidRequest, "request body: %v", err)
	}
	return nil
}

// wantsEvents reports whether the client asked for server-sent events.
func wantsEvents(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, v)
}
