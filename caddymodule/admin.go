package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/sandboxes"
)

func init() {
	caddy.RegisterModule(new(AdminAPI))
}

// AdminAPI is `admin.api.sandboxes`: list, inspect and delete sandboxes on Caddy's admin endpoint (which has no
// authentication of its own: keep it on localhost or a unix socket).
//
//	GET    /sandboxes[?owner=&status=&limit=&cursor=]
//	POST   /sandboxes {"profile":..., "owner":..., "ttl": seconds or "1h", "env": {...}, "workspace_id": ...}
//	GET    /sandboxes/{id}
//	DELETE /sandboxes/{id}
//	POST   /sandboxes/{id}/pause | /resume | /fork | /snapshots {"name": ...}     (admin_lifecycle.go)
//	GET    /sandbox-snapshots[?owner=]   GET|DELETE /sandbox-snapshots/{snapshot id}
//	GET    /sandbox-pools                 every profile's warm pool: target, size, hits, misses, refill latency
type AdminAPI struct {
	ctx caddy.Context
}

// CaddyModule returns the Caddy module information.
func (*AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.sandboxes", New: func() caddy.Module { return new(AdminAPI) }}
}

// Provision keeps the context; the Manager is looked up per request.
func (a *AdminAPI) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	return nil
}

// Routes returns the admin routes.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/sandboxes", Handler: caddy.AdminHandlerFunc(a.list)},
		{Pattern: "/sandboxes/", Handler: caddy.AdminHandlerFunc(a.one)},
		{Pattern: "/sandbox-snapshots", Handler: caddy.AdminHandlerFunc(a.snapshots)},
		{Pattern: "/sandbox-snapshots/", Handler: caddy.AdminHandlerFunc(a.snapshots)},
		{Pattern: "/sandbox-pools", Handler: caddy.AdminHandlerFunc(a.pools)},
	}
}

// pools answers GET /sandbox-pools.
func (a *AdminAPI) pools(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	mgr, err := runningManager()
	if err != nil {
		return err
	}
	pools, conc := mgr.WarmPools()
	if pools == nil {
		pools = []sandboxes.PoolStats{}
	}
	return writeJSON(w, map[string]any{"pools": pools, "refill_concurrency": conc})
}

// createRequest is the body of POST /sandboxes.
type createRequest struct {
	Profile     string             `json:"profile"`
	Owner       string             `json:"owner"`
	TTL         sandboxes.Duration `json:"ttl"`
	Env         map[string]string  `json:"env"`
	WorkspaceID string             `json:"workspace_id"`
}

func (a *AdminAPI) list(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodPost {
		return a.create(w, r)
	}
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	mgr, err := runningManager()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	items, next, err := mgr.List(r.Context(), sandboxes.ListOptions{Owner: q.Get("owner"), Status: sandboxes.Status(q.Get("status")),
		Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		return apiError(err)
	}
	return writeJSON(w, map[string]any{"items": items, "next_cursor": next, "stats": mgr.Stats()})
}

func (a *AdminAPI) create(w http.ResponseWriter, r *http.Request) error {
	mgr, err := runningManager()
	if err != nil {
		return err
	}
	var req createRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("decoding the request: %w", err)}
	}
	sb, err := mgr.Create(r.Context(), sandboxes.CreateRequest{Profile: req.Profile, Owner: req.Owner, TTL: req.TTL.Std(),
		Env: req.Env, WorkspaceID: req.WorkspaceID})
	if err != nil {
		return apiError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return json.NewEncoder(w).Encode(sb)
}

func (a *AdminAPI) one(w http.ResponseWriter, r *http.Request) error {
	mgr, err := runningManager()
	if err != nil {
		return err
	}
	id := strings.Trim(strings.TrimPrefix(r.URL.Path, "/sandboxes/"), "/")
	if id == "" {
		return a.list(w, r)
	}
	if sid, ok := strings.CutSuffix(id, "/agent"); ok {
		return a.agent(w, r, mgr, sid)
	}
	if sid, action, ok := strings.Cut(id, "/"); ok {
		return a.lifecycle(w, r, mgr, sid, action) // admin_lifecycle.go
	}
	switch r.Method {
	case http.MethodGet:
		sb, err := mgr.Get(r.Context(), id)
		if err != nil {
			return apiError(err)
		}
		return writeJSON(w, sb)
	case http.MethodDelete:
		if err := mgr.Delete(r.Context(), id); err != nil {
			return apiError(err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	default:
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
}

// agentAccess is the body of GET /sandboxes/{id}/agent.
type agentAccess struct {
	Addr  string `json:"addr"`
	Token string `json:"token"`
}

// agent answers how to reach a running sandbox's agent directly, token included. The sandbox itself holds only the
// token's digest, so this (the operator's own endpoint, which can already reconfigure everything) is the one place
// outside the gateway's memory and store that shows it: for debugging an agent by hand, and for tests.
func (a *AdminAPI) agent(w http.ResponseWriter, r *http.Request, mgr *sandboxes.Manager, id string) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	t, ok := mgr.Resolve(id)
	if !ok {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("sandbox %s is not running", id)}
	}
	return writeJSON(w, agentAccess{Addr: t.Addr, Token: t.Token})
}

func apiError(err error) error {
	status := http.StatusInternalServerError
	switch sandboxes.ErrorCode(err) {
	case sandboxes.CodeNotFound, sandboxes.CodeSnapshotNotFound:
		status = http.StatusNotFound
	case sandboxes.CodeInvalidState:
		status = http.StatusConflict
	case sandboxes.CodeSnapshotTooLarge:
		status = http.StatusRequestEntityTooLarge
	case sandboxes.CodeInvalid, sandboxes.CodeUnknownProfile, sandboxes.CodeCapabilityAbsent:
		status = http.StatusBadRequest
	case sandboxes.CodeQuotaExceeded:
		status = http.StatusTooManyRequests
	case sandboxes.CodeImageNotAllowed:
		status = http.StatusForbidden
	}
	return caddy.APIError{HTTPStatus: status, Err: err}
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

var (
	_ caddy.AdminRouter = (*AdminAPI)(nil)
	_ caddy.Provisioner = (*AdminAPI)(nil)
)
