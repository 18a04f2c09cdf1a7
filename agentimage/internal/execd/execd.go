// Package execd serves the subset of OpenSandbox's execd API that the @alibaba-group/opensandbox SDK calls, under
// agentapi.ExecdPrefix on the agent's port and behind its token: commands (streamed as execd streams them), files,
// directories and metrics. It is a translator: processes are the agent's process.Manager, files go through
// files.Service and workspace.Root, so the confinement to the workspace and the user's home holds here too (execd
// itself allows any path).
package execd

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/files"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// Mux is where routes go (the agent's server, which adds token authentication).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Deps are what the handlers use.
type Deps struct {
	// Files serves paths; its root should allow the user's home beside the workspace (workspace.Root.WithAlso).
	Files *files.Service
	Procs *process.Manager
	// Home is the user's home, for a leading "~" in paths ("" if none).
	Home   string
	Logger *slog.Logger
	// Ping is the interval of ping events on command streams (default 3s, as execd).
	Ping time.Duration
}

// API holds the handlers.
type API struct {
	Deps
	metrics *metricsSampler
}

// Register adds the execd routes to mux.
func Register(mux Mux, d Deps) *API {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Ping <= 0 {
		d.Ping = agentapi.ExecdStreamPingSecs * time.Second
	}
	a := &API{Deps: d, metrics: newMetricsSampler()}
	h := func(pattern string, f func(http.ResponseWriter, *http.Request)) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.Handle(method+" "+agentapi.ExecdPrefix+path, http.HandlerFunc(f))
	}
	h("GET /ping", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

	h("POST /command", a.runCommand)
	h("DELETE /command", a.interruptCommand)
	// /command/status/{id} and /command/{id}/logs overlap (/command/status/logs), which ServeMux refuses: one
	// route dispatches both.
	h("GET /command/{a}/{b}", a.commandInfo)

	h("GET /files/info", a.filesInfo)
	h("DELETE /files", a.removeFiles)
	h("POST /files/permissions", a.chmodFiles)
	h("POST /files/mv", a.moveFiles)
	h("GET /files/search", a.searchFiles)
	h("POST /files/replace", a.replaceContent)
	h("POST /files/upload", a.upload)
	h("GET /files/download", a.download)

	h("GET /directories/list", a.listDirectory)
	h("POST /directories", a.makeDirs)
	h("DELETE /directories", a.removeDirs)

	h("GET /metrics", a.getMetrics)
	return a
}

// maxJSONBody caps request bodies of the JSON routes (maps of paths; file contents go through upload).
const maxJSONBody = 8 << 20

// decode reads a JSON body into v. Unknown fields are ignored, as execd ignores them: newer SDKs may send more.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody)).Decode(v)
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Code: agentapi.ExecdCodeInvalidRequest,
			Message: fmt.Sprintf("error parsing request, MAYBE invalid body format. %v", err)}
	}
	return nil
}

// Error is an execd error answer.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func missingQuery(name string) *Error {
	return errorf(http.StatusBadRequest, agentapi.ExecdCodeMissingQuery, "missing query parameter '%s'", name)
}

// asExecd maps the agent's typed errors onto execd's codes. HTTP statuses stay the agent's where execd has none
// more precise (409, 413, 507), so the SDK, which looks only at the status class and the code, sees execd's codes.
func asExecd(err error) *Error {
	var ee *Error
	if errors.As(err, &ee) {
		return ee
	}
	if errors.Is(err, workspace.ErrOutside) {
		return &Error{Status: http.StatusForbidden, Code: agentapi.ExecdCodePathNotAllowed, Message: messageOf(err)}
	}
	var ae *agentapi.Error
	if !errors.As(err, &ae) {
		return &Error{Status: http.StatusInternalServerError, Code: agentapi.ExecdCodeRuntimeError, Message: err.Error()}
	}
	switch ae.Code {
	case agentapi.CodeFileNotFound:
		return &Error{Status: http.StatusNotFound, Code: agentapi.ExecdCodeFileNotFound, Message: ae.Message}
	case agentapi.CodeInvalidRequest, agentapi.CodeInvalidPath:
		return &Error{Status: http.StatusBadRequest, Code: agentapi.ExecdCodeInvalidRequest, Message: ae.Message}
	case agentapi.CodeTooLarge:
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: agentapi.ExecdCodeInvalidFileContent, Message: ae.Message}
	case agentapi.CodeNotSupported:
		return &Error{Status: http.StatusNotImplemented, Code: agentapi.ExecdCodeNotSupported, Message: ae.Message}
	}
	return &Error{Status: ae.Status(), Code: agentapi.ExecdCodeRuntimeError, Message: ae.Message}
}

func messageOf(err error) string {
	var ae *agentapi.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}

// writeError answers with err as execd's {code, message}.
func writeError(w http.ResponseWriter, err error) {
	e := asExecd(err)
	writeJSON(w, e.Status, agentapi.ExecdError{Code: e.Code, Message: e.Message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone if this fails
}

// ok answers execd's success without data: 200 and an empty body.
func ok(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }

// ExpandPath expands what execd expands in a path before the agent confines it: $VAR and ${VAR} from env (an
// undefined variable is an error, as in execd) and a leading "~" to home. The result may still be relative (to
// the workspace) or outside every root; workspace.Root decides that.
func ExpandPath(p, home string, env func(string) (string, bool)) (string, error) {
	if p == "" {
		return "", nil
	}
	var missing []string
	expanded := os.Expand(p, func(name string) string {
		v, ok := env(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest,
			"path %q references undefined environment variables: %s", p, strings.Join(missing, ","))
	}
	if expanded == "~" || strings.HasPrefix(expanded, "~/") {
		if home == "" {
			return "", errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "path %q: the sandbox user has no home", p)
		}
		return filepath.Join(home, expanded[1:]), nil
	}
	return expanded, nil
}

func (a *API) expand(p string) (string, error) {
	return ExpandPath(p, a.Home, os.LookupEnv)
}

// locate expands p, as a client gave it, and resolves it with resolve: resolveEntry for the entry itself, the
// root's Resolve to follow it, ResolveParent for a name in its directory.
func (a *API) locate(p string, resolve func(string) (string, error)) (string, error) {
	x, err := a.expand(p)
	if err != nil {
		return "", err
	}
	return resolve(x)
}

// queryPath reads a handler's required ?path= and locates it. params reads the handler's other query parameters
// between the two, so a request with several faults hears of the first one execd would name: a missing path, a
// bad parameter, then a path that cannot be resolved.
func (a *API) queryPath(q url.Values, resolve func(string) (string, error), params func() error) (p, abs string, err error) {
	p = q.Get("path")
	if p == "" {
		return "", "", missingQuery("path")
	}
	if err := params(); err != nil {
		return "", "", err
	}
	abs, err = a.locate(p, resolve)
	return p, abs, err
}

// resolveEntry resolves p for operations on the entry itself (info, remove, the list root): the parent's symlinks
// are resolved, the last element is kept. A root itself (the workspace, home) is allowed.
func (a *API) resolveEntry(p string) (string, error) {
	root := a.Files.Root()
	abs, err := root.ResolveParent(p)
	if err == nil {
		return abs, nil
	}
	if r, rerr := root.Resolve(p); rerr == nil {
		for _, d := range root.Dirs() {
			if r == d {
				return r, nil
			}
		}
	}
	return "", err
}
