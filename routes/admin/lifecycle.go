package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sandgate/sandgate/sandboxes"
)

// Pause, resume, fork and snapshots on the admin endpoint: the operator's own, so no owner scoping.

func (h *Handler) lifecycle(w http.ResponseWriter, r *http.Request, mgr *sandboxes.Manager, id, action string) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed(r)
	}
	var (
		v   any
		err error
	)
	switch action {
	case "pause":
		v, err = mgr.Pause(r.Context(), id)
	case "resume":
		v, err = mgr.Resume(r.Context(), id)
	case "fork":
		v, err = mgr.Fork(r.Context(), id, sandboxes.ForkRequest{})
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
		v, err = mgr.CreateSnapshot(r.Context(), id, sandboxes.SnapshotRequest{Name: req.Name})
	default:
		return &Error{Status: http.StatusNotFound, Err: fmt.Errorf("unknown sandbox action %q", action)}
	}
	if err != nil {
		return ErrorFor(err)
	}
	return writeJSON(w, v)
}

func (h *Handler) snapshots(w http.ResponseWriter, r *http.Request) error {
	mgr, err := h.manager()
	if err != nil {
		return err
	}
	id := strings.Trim(strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/sandbox-snapshots"), "/"), "/")
	switch {
	case id == "" && r.Method == http.MethodGet:
		list, err := mgr.Snapshots(r.Context(), r.URL.Query().Get("owner"))
		if err != nil {
			return ErrorFor(err)
		}
		return writeJSON(w, map[string]any{"items": list})
	case id != "" && r.Method == http.MethodGet:
		s, err := mgr.GetSnapshot(r.Context(), id)
		if err != nil {
			return ErrorFor(err)
		}
		return writeJSON(w, s)
	case id != "" && r.Method == http.MethodDelete:
		if err := mgr.DeleteSnapshot(r.Context(), id); err != nil {
			return ErrorFor(err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	default:
		return methodNotAllowed(r)
	}
}
