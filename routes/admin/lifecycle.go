package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Pause, resume, fork and snapshots on the admin endpoint: the operator's own, so no owner scoping.

func (h *Handler) lifecycle(w http.ResponseWriter, r *http.Request, svc *service.Service, id, action string) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed(r)
	}
	var (
		v   any
		err error
	)
	switch action {
	case "pause":
		v, err = svc.Pause(r.Context(), op(), id)
	case "resume":
		v, err = svc.Resume(r.Context(), op(), id)
	case "fork":
		v, err = svc.ForkAs(r.Context(), op(), id, sandboxes.ForkRequest{})
	case "snapshots":
		var req struct {
			Name string `json:"name"`
		}
		if r.ContentLength != 0 {
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
			dec.DisallowUnknownFields()
			if derr := dec.Decode(&req); derr != nil {
				return &Error{Status: http.StatusBadRequest, Err: fmt.Errorf("decoding the request: %w", derr)}
			}
		}
		v, err = svc.CreateSnapshot(r.Context(), op(), id, sandboxes.SnapshotRequest{Name: req.Name})
	default:
		return &Error{Status: http.StatusNotFound, Err: fmt.Errorf("unknown sandbox action %q", action)}
	}
	if err != nil {
		return ErrorFor(err)
	}
	return writeJSON(w, v)
}

func (h *Handler) snapshots(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	id := strings.Trim(strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/sandbox-snapshots"), "/"), "/")
	switch {
	case id == "" && r.Method == http.MethodGet:
		all, err := svc.Snapshots(r.Context(), op(), "")
		if err != nil {
			return ErrorFor(err)
		}
		owner := r.URL.Query().Get("owner")
		list := all[:0]
		for _, s := range all {
			if owner == "" || s.Owner == owner {
				list = append(list, s)
			}
		}
		return writeJSON(w, map[string]any{"items": list})
	case id != "" && r.Method == http.MethodGet:
		s, err := svc.GetSnapshot(r.Context(), op(), id)
		if err != nil {
			return ErrorFor(err)
		}
		return writeJSON(w, s)
	case id != "" && r.Method == http.MethodDelete:
		if err := svc.DeleteSnapshot(r.Context(), op(), id); err != nil {
			return ErrorFor(err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	default:
		return methodNotAllowed(r)
	}
}
