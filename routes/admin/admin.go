// Package admin is the sandboxes part of Caddy's admin endpoint on net/http alone: list, create, inspect, delete,
// pause, resume, fork and snapshot sandboxes, and the warm pools. Its handlers return errors instead of writing
// them, because the admin endpoint answers errors in Caddy's own envelope ({"error": "..."}): an *Error carries the
// status from this dialect's one table (errors.go), and package caddymodule turns it into a caddy.APIError.
//
// The endpoint has no authentication of its own: keep it on localhost or a unix socket.
//
//	GET    /sandboxes[?owner=&status=&limit=&cursor=]
//	POST   /sandboxes {"profile":..., "owner":..., "ttl": seconds or "1h", "env": {...}, "workspace_id": ...}
//	GET    /sandboxes/{id}
//	DELETE /sandboxes/{id}
//	GET    /sandboxes/{id}/agent                                                  the agent's address and token
//	POST   /sandboxes/{id}/pause | /resume | /fork | /snapshots {"name": ...}     (lifecycle.go)
//	GET    /sandbox-snapshots[?owner=]   GET|DELETE /sandbox-snapshots/{snapshot id}
//	GET    /sandbox-pools                 every profile's warm pool: target, size, hits, misses, refill latency;
//	                                      image_pools: the pools by image (warm_images)
package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// HandlerFunc is an admin route: it writes a success itself and returns any failure.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Route is one pattern of the admin endpoint.
type Route struct {
	Pattern string
	Handler HandlerFunc
}

// Handler serves the routes through whatever service Service returns at request time (nil: the sandboxes app is
// not running), as the operator (service.OperatorPrincipal): every owner's sandboxes, through the same road as
// every dialect.
type Handler struct {
	Service func() *service.Service
}

// op is the operator's principal.
func op() service.Principal { return service.OperatorPrincipal() }

// Routes returns the admin routes.
func (h *Handler) Routes() []Route {
	return []Route{
		{Pattern: "/sandboxes", Handler: h.list},
		{Pattern: "/sandboxes/", Handler: h.one},
		{Pattern: "/sandbox-snapshots", Handler: h.snapshots},
		{Pattern: "/sandbox-snapshots/", Handler: h.snapshots},
		{Pattern: "/sandbox-pools", Handler: h.pools},
	}
}

func (h *Handler) service() (*service.Service, error) {
	if s := h.Service(); s != nil {
		return s, nil
	}
	return nil, &Error{Status: http.StatusNotFound, Err: errors.New("the sandboxes app is not running")}
}

// pools answers GET /sandbox-pools.
func (h *Handler) pools(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed(r)
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	pools, conc, err := svc.WarmPools(op())
	if err != nil {
		return ErrorFor(err)
	}
	if pools == nil {
		pools = []sandboxes.PoolStats{}
	}
	images, err := svc.WarmImagePools(op())
	if err != nil {
		return ErrorFor(err)
	}
	if images == nil {
		images = []sandboxes.ImagePoolStats{}
	}
	return writeJSON(w, map[string]any{"pools": pools, "image_pools": images, "refill_concurrency": conc})
}

// createRequest is the body of POST /sandboxes.
type createRequest struct {
	Profile     string             `json:"profile"`
	Owner       string             `json:"owner"`
	TTL         sandboxes.Duration `json:"ttl"`
	Env         map[string]string  `json:"env"`
	WorkspaceID string             `json:"workspace_id"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodPost {
		return h.create(w, r)
	}
	if r.Method != http.MethodGet {
		return methodNotAllowed(r)
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	items, next, err := svc.ListAll(r.Context(), op(), sandboxes.ListOptions{Owner: q.Get("owner"), Status: sandboxes.Status(q.Get("status")),
		Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		return ErrorFor(err)
	}
	stats, err := svc.Stats(op())
	if err != nil {
		return ErrorFor(err)
	}
	return writeJSON(w, map[string]any{"items": items, "next_cursor": next, "stats": stats})
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	var req createRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return &Error{Status: http.StatusBadRequest, Err: fmt.Errorf("decoding the request: %w", err)}
	}
	// The operator creates on behalf of the owner the request names.
	sb, err := svc.Create(r.Context(), service.Principal{Owner: req.Owner, Admin: true}, sandboxes.CreateRequest{Profile: req.Profile,
		TTL: req.TTL.Std(), Env: req.Env, WorkspaceID: req.WorkspaceID})
	if err != nil {
		return ErrorFor(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return json.NewEncoder(w).Encode(sb)
}

func (h *Handler) one(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	id := strings.Trim(strings.TrimPrefix(r.URL.Path, "/sandboxes/"), "/")
	if id == "" {
		return h.list(w, r)
	}
	if sid, ok := strings.CutSuffix(id, "/agent"); ok {
		return h.agent(w, r, svc, sid)
	}
	if sid, action, ok := strings.Cut(id, "/"); ok {
		return h.lifecycle(w, r, svc, sid, action) // lifecycle.go
	}
	switch r.Method {
	case http.MethodGet:
		sb, err := svc.Visible(r.Context(), op(), id)
		if err != nil {
			return ErrorFor(err)
		}
		return writeJSON(w, sb)
	case http.MethodDelete:
		if err := svc.Delete(r.Context(), op(), id); err != nil {
			return ErrorFor(err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	default:
		return methodNotAllowed(r)
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
func (h *Handler) agent(w http.ResponseWriter, r *http.Request, svc *service.Service, id string) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed(r)
	}
	t, ok, err := svc.AgentAccess(op(), id)
	if err != nil {
		return ErrorFor(err)
	}
	if !ok {
		return &Error{Status: http.StatusNotFound, Err: fmt.Errorf("sandbox %s is not running", id)}
	}
	return writeJSON(w, agentAccess{Addr: t.Addr, Token: t.Token})
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}
