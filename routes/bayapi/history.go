package bayapi

import (
	"net/http"
	"slices"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// checkExecType adds Bay's issue for an exec_type query parameter that is not one of service.ExecTypes ("" is any).
func checkExecType(q *fields, execType string) {
	if execType != "" && !slices.Contains(service.ExecTypes, execType) {
		q.issue("string_pattern_mismatch", q.loc("exec_type"), "String should match pattern '^(python|shell|browser|browser_batch)$'", execType,
			map[string]any{"pattern": "^(python|shell|browser|browser_batch)$"})
	}
}

func (h *Handler) listHistory(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	q := queryFields(r)
	execType := q.str("exec_type", false, "")
	successOnly := q.boolean("success_only", false)
	limit := q.integer("limit", 100, bound(1), bound(500), false)
	offset := q.integer("offset", 0, bound(0), nil, false)
	tags := q.str("tags", false, "")
	hasNotes := q.boolean("has_notes", false)
	hasDescription := q.boolean("has_description", false)
	checkExecType(q, execType)
	if !decodeOrFail(w, q) {
		return
	}
	keep := service.HistoryFilter{ExecType: execType, SuccessOnly: successOnly, Tags: tags, HasNotes: hasNotes,
		HasDescription: hasDescription}.Keep()
	// Only the page is held in memory; total counts every match.
	page, total, err := h.svc.History(r.Context(), p, id, keep, int(offset), int(limit))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": page, "total": total})
}

func (h *Handler) lastHistory(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	q := queryFields(r)
	execType := q.str("exec_type", false, "")
	checkExecType(q, execType)
	if !decodeOrFail(w, q) {
		return
	}
	found, _, err := h.svc.History(r.Context(), p, id, service.HistoryFilter{ExecType: execType}.Keep(), 0, 1)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if len(found) > 0 { // newest first
		writeJSON(w, http.StatusOK, found[0])
		return
	}
	if execType != "" {
		writeError(w, r, service.Errorf(service.CodeNotFound, "No %s execution history for sandbox %s", execType, id))
		return
	}
	writeError(w, r, service.Errorf(service.CodeNotFound, "No execution history for sandbox %s", id))
}

func (h *Handler) getHistory(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id, eid := r.PathValue("id"), r.PathValue("eid")
	found, _, err := h.svc.History(r.Context(), p, id, func(e *sandboxes.HistoryEntry) bool { return e.ID == eid }, 0, 1)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if len(found) == 1 {
		writeJSON(w, http.StatusOK, found[0])
		return
	}
	writeError(w, r, service.Errorf(service.CodeNotFound, "Execution not found: %s", eid))
}

func (h *Handler) patchHistory(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id, eid := r.PathValue("id"), r.PathValue("eid")
	f := bodyFields(r, true)
	desc := f.optStr("description")
	tags := f.optStr("tags")
	notes := f.optStr("notes")
	if !decodeOrFail(w, f) {
		return
	}
	e, err := h.svc.UpdateHistory(r.Context(), p, id, eid, func(e *sandboxes.HistoryEntry) {
		if desc != nil {
			e.Description = desc
		}
		if tags != nil {
			e.Tags = tags
		}
		if notes != nil {
			e.Notes = notes
		}
	})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}
