package e2b

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Snapshots and fork, onto sandgate's: an E2B snapshot is a workspace snapshot (files under the workspace, not
// memory or processes) owned by the caller; its id is the template id a create names to start from it, and
// DELETE /templates/{id} deletes it. A fork is sandgate's fork: a new sandbox with a copy of the workspace, the
// source's template, envs, metadata and network settings, and new tokens.

// maxForks bounds one fork call's count.
const maxForks = 10

func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if err := h.svc.CanSnapshot(); err != nil {
		writeError(w, toError(err))
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if e := decodeJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	if _, _, e := h.sandbox(r.Context(), p, id); e != nil {
		writeError(w, e)
		return
	}
	snap, err := h.svc.CreateSnapshot(r.Context(), p, id, sandboxes.SnapshotRequest{Name: body.Name})
	if err != nil {
		writeError(w, toError(err))
		return
	}
	writeJSON(w, http.StatusCreated, snapshotInfo(snap))
}

func snapshotInfo(s sandboxes.Snapshot) SnapshotInfo {
	names := []string{s.ID}
	if s.Name != "" && s.Name != s.ID {
		names = append(names, s.Name)
	}
	return SnapshotInfo{SnapshotID: s.ID, Names: names}
}

// listSnapshots answers the caller's snapshots, newest first, optionally of one sandbox or with one name, a page of
// limit (default and maximum 100) at a time; the cursor is the offset of the next page.
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.CanSnapshot(); err != nil {
		writeError(w, toError(err))
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "the query is not validly escaped"))
		return
	}
	limit, offset := MaxPage, 0
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxPage {
			writeError(w, errorf(http.StatusBadRequest, "limit must be from 1 to %d", MaxPage))
			return
		}
	}
	if v := q.Get("nextToken"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			writeError(w, errorf(http.StatusBadRequest, "nextToken is not a token of this list"))
			return
		}
	}
	list, err := h.svc.Snapshots(r.Context(), p, q.Get("sandboxID"))
	if err != nil {
		writeError(w, toError(err))
		return
	}
	name := q.Get("name")
	out := []SnapshotInfo{}
	for _, s := range list {
		if name == "" || s.Name == name || s.ID == name {
			out = append(out, snapshotInfo(s))
		}
	}
	start := min(offset, len(out))
	end := min(start+limit, len(out))
	if end < len(out) {
		w.Header().Set(NextTokenHeader, strconv.Itoa(end))
	}
	writeJSON(w, http.StatusOK, out[start:end])
}

func (h *Handler) deleteSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) {
	if err := h.svc.CanSnapshot(); err != nil {
		writeError(w, toError(err))
		return
	}
	id := r.PathValue("snapshot")
	if err := h.svc.DeleteSnapshot(r.Context(), p, id); err != nil {
		e := toError(err)
		if e.Status == http.StatusNotFound {
			e = errorf(http.StatusNotFound, "snapshot %q not found", id)
		}
		writeError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fork answers 201 with one item per fork asked (count, default 1): the new sandbox, or the error that stopped it.
func (h *Handler) fork(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if err := h.svc.CanSnapshot(); err != nil {
		writeError(w, toError(err))
		return
	}
	var body struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if e := decodeJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	count := 1
	if body.Count != nil {
		count = *body.Count
	}
	if count < 1 || count > maxForks {
		writeError(w, errorf(http.StatusBadRequest, "count must be from 1 to %d", maxForks))
		return
	}
	ttl, e := h.ttlOf(body.Timeout, 15*time.Second)
	if e != nil {
		writeError(w, e)
		return
	}
	_, st, e := h.sandbox(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	out := make([]ForkItem, 0, count)
	for range count {
		sb, err := h.svc.ForkLabelled(r.Context(), p, id, ttl, e2bMetadata(st), true)
		if err == nil {
			var a Sandbox
			if a, e = h.answer(sb, st); e == nil {
				out = append(out, ForkItem{Sandbox: &a})
				continue
			}
		} else {
			e = toError(err)
		}
		item := ForkItem{}
		item.Error = &struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{e.Status, e.Message}
		out = append(out, item)
	}
	writeJSON(w, http.StatusCreated, out)
}
