package opensandbox

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// present turns a core sandbox into OpenSandbox's shape; the reserved keys become image and entrypoint.
func present(sb *sandboxes.Sandbox) Sandbox {
	md := map[string]string{}
	for k, v := range sb.Metadata {
		if !strings.HasPrefix(k, reservedPrefix) {
			md[k] = v
		}
	}
	out := Sandbox{ID: sb.ID, Status: stateOf(sb), Metadata: md, Entrypoint: []string{}, CreatedAt: rfc3339(sb.CreatedAt)}
	if uri := sb.Metadata[keyImage]; uri != "" {
		out.Image = &ImageSpec{URI: uri}
	}
	if ep := sb.Metadata[keyEntrypoint]; ep != "" {
		_ = json.Unmarshal([]byte(ep), &out.Entrypoint) // written by create; a damaged value reads as empty
	}
	if sb.ExpiresAt != nil {
		s := rfc3339(*sb.ExpiresAt)
		out.ExpiresAt = &s
	}
	return out
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, p service.Principal) {
	sb, e := h.visible(r.Context(), p, r.PathValue("id"))
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, present(sb))
}

// maxPageSize bounds one page.
const maxPageSize = 200

// list answers GET /sandboxes: state (repeatable, case-insensitive), metadata=k=v&k2=v2 (every pair must match),
// page (from 1) and pageSize (default 20). Filtering is one pass over the caller's sandboxes in the Manager.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, p service.Principal) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, "the query is not validly escaped"))
		return
	}
	page, pageSize := 1, 20
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, "page must be a whole number from 1"))
			return
		}
	}
	if v := q.Get("pageSize"); v != "" {
		if pageSize, err = strconv.Atoi(v); err != nil || pageSize < 1 || pageSize > maxPageSize {
			writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, "pageSize must be from 1 to %d", maxPageSize))
			return
		}
	}
	want, e := metadataFilter(q["metadata"])
	if e != nil {
		writeError(w, e)
		return
	}
	var states []string
	for _, s := range q["state"] {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				states = append(states, strings.ToLower(part))
			}
		}
	}
	opts := sandboxes.ListOptions{Metadata: want, Limit: 1000}
	var matched []Sandbox
	for {
		items, next, err := h.cfg.Service.ListSandboxes(r.Context(), p, opts)
		if err != nil {
			writeError(w, toError(err))
			return
		}
		for i := range items {
			s := present(&items[i])
			if len(states) > 0 && !slices.Contains(states, strings.ToLower(s.Status.State)) {
				continue
			}
			matched = append(matched, s)
		}
		if next == "" {
			break
		}
		opts.Cursor = next
	}
	total := len(matched)
	start := min((page-1)*pageSize, total)
	end := min(start+pageSize, total)
	items := matched[start:end]
	if items == nil {
		items = []Sandbox{}
	}
	writeJSON(w, http.StatusOK, ListResponse{Items: items, Pagination: Pagination{
		Page: page, PageSize: pageSize, TotalItems: total, TotalPages: (total + pageSize - 1) / pageSize, HasNextPage: end < total,
	}})
}

// metadataFilter reads metadata=k%3Dv%26k2%3Dv2 (each value a query string of its own, as the SDKs encode it).
func metadataFilter(values []string) (map[string]string, *Error) {
	if len(values) == 0 {
		return nil, nil
	}
	want := map[string]string{}
	for _, raw := range values {
		pairs, err := url.ParseQuery(raw)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "metadata filter %q: %v", raw, err)
		}
		for k, vs := range pairs {
			if k == "" || len(vs) != 1 {
				return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "metadata filter %q: want k=v pairs, each key once", raw)
			}
			if strings.HasPrefix(k, reservedPrefix) {
				return nil, errorf(http.StatusBadRequest, CodeInvalidMetadata, "metadata key %q: the %s prefix is reserved", k, reservedPrefix)
			}
			want[k] = vs[0]
		}
	}
	return want, nil
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if _, e := h.visible(r.Context(), p, id); e != nil {
		writeError(w, e)
		return
	}
	if err := h.cfg.Service.Delete(r.Context(), p, id); err != nil {
		writeError(w, toError(err))
		return
	}
	h.cfg.Logger.Info("opensandbox delete", "sandbox", id, "owner", p.Owner)
	w.WriteHeader(http.StatusNoContent)
}

// patchMetadata is a JSON merge patch of the tenant's metadata (null deletes a key).
func (h *Handler) patchMetadata(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if _, e := h.visible(r.Context(), p, id); e != nil {
		writeError(w, e)
		return
	}
	var patch map[string]*string
	if e := decodeJSON(r, maxCreateBody, &patch); e != nil {
		writeError(w, e)
		return
	}
	for k := range patch {
		if strings.HasPrefix(k, reservedPrefix) {
			writeError(w, errorf(http.StatusBadRequest, CodeInvalidMetadata, "metadata key %q: the %s prefix is reserved", k, reservedPrefix))
			return
		}
	}
	sb, err := h.cfg.Service.PatchMetadata(r.Context(), p, id, patch)
	if err != nil {
		e := toError(err)
		if e.Code == CodeInvalidRequest {
			e.Code = CodeInvalidMetadata
		}
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, present(&sb))
}

// pause freezes a running sandbox. A paused or idle one is already not running: pausing it again does nothing.
func (h *Handler) pause(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.transition(w, r, p, h.cfg.Service.Pause, func(id string, sb *sandboxes.Sandbox) (bool, *Error) {
		switch sb.Status {
		case sandboxes.StatusPaused, sandboxes.StatusIdle:
			return true, nil
		case sandboxes.StatusReady:
			return false, nil
		}
		return false, errorf(http.StatusConflict, CodeSandboxNotRunning, "sandbox %s is %s, not Running", id, stateOf(sb).State)
	})
}

// resume thaws a paused sandbox, or starts an idle one; a running one answers DOCKER::SANDBOX_NOT_PAUSED (FastGPT
// connects instead on that code).
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, p service.Principal) {
	h.transition(w, r, p, h.cfg.Service.Resume, func(id string, sb *sandboxes.Sandbox) (bool, *Error) {
		if sb.Status != sandboxes.StatusPaused && sb.Status != sandboxes.StatusIdle {
			return false, errorf(http.StatusConflict, CodeSandboxNotPaused, "sandbox %s is %s, not Paused", id, stateOf(sb).State)
		}
		return false, nil
	})
}

// transition answers pause and resume alike: 202 once the sandbox the caller sees is moved by change, or at once
// when check finds it already where it was asked to go; check's error refuses a sandbox in a state it cannot leave.
func (h *Handler) transition(w http.ResponseWriter, r *http.Request, p service.Principal,
	change func(ctx context.Context, p service.Principal, id string) (sandboxes.Sandbox, error), check func(id string, sb *sandboxes.Sandbox) (bool, *Error)) {
	id := r.PathValue("id")
	sb, e := h.visible(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	done, e := check(id, sb)
	if e != nil {
		writeError(w, e)
		return
	}
	if !done {
		if _, err := change(r.Context(), p, id); err != nil {
			writeError(w, toError(err))
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// renew moves the expiry to the asked time, which must be in the future and after the current expiry.
func (h *Handler) renew(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	sb, e := h.visible(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	var body struct {
		ExpiresAt string `json:"expiresAt"`
	}
	if e := decodeJSON(r, 64<<10, &body); e != nil {
		writeError(w, e)
		return
	}
	at, err := time.Parse(time.RFC3339Nano, body.ExpiresAt)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidExpiration, "expiresAt %q is not an RFC 3339 time", body.ExpiresAt))
		return
	}
	now := h.cfg.Now()
	if !at.After(now) {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidExpiration, "expiresAt %s is not in the future", rfc3339(at)))
		return
	}
	if sb.ExpiresAt == nil {
		writeError(w, errorf(http.StatusConflict, CodeExpirationNotExtended, "sandbox %s never expires", id))
		return
	}
	if !at.After(*sb.ExpiresAt) {
		writeError(w, errorf(http.StatusConflict, CodeExpirationNotExtended, "expiresAt %s is not after the current expiry %s", rfc3339(at), rfc3339(*sb.ExpiresAt)))
		return
	}
	if h.cfg.MaxTimeout > 0 && at.Sub(now) > h.cfg.MaxTimeout {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidExpiration, "expiresAt is more than this gateway's maximum of %.0fs away", h.cfg.MaxTimeout.Seconds()))
		return
	}
	got, err := h.cfg.Service.ExtendTTL(r.Context(), p, id, at.Sub(*sb.ExpiresAt))
	if err != nil {
		writeError(w, toError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"expiresAt": rfc3339(*got.ExpiresAt)})
}

// endpoint answers how to reach a port of the sandbox: always through this gateway's proxy (sandgate never exposes
// a container directly, so use_server_proxy changes nothing), with the sandbox's proxy key in the path so that a
// client that keeps only the URL (FastGPT's relay) is admitted too. The key is repeated in headers for clients that
// send endpoint headers.
func (h *Handler) endpoint(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if _, e := h.visible(r.Context(), p, id); e != nil {
		writeError(w, e)
		return
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != r.PathValue("port") {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidPort, "port %q is not a port number", r.PathValue("port")))
		return
	}
	if r.URL.Query().Has("expires") && r.URL.Query().Has("use_server_proxy") {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, "expires and use_server_proxy cannot be combined"))
		return
	}
	key, err := h.cfg.Service.AccessKey(r.Context(), p, id, proxyKeyPurpose)
	if err != nil {
		writeError(w, toError(err))
		return
	}
	host := h.cfg.EndpointHost
	if host == "" {
		host = r.Host
	}
	ep := Endpoint{
		Endpoint: strings.TrimSuffix(host, "/") + "/sandboxes/" + id + proxyKeySeparator + key + "/proxy/" + strconv.Itoa(port),
		Headers:  map[string]string{ProxyKeyHeader: key},
	}
	writeJSON(w, http.StatusOK, ep)
}
