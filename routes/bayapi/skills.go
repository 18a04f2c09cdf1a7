package bayapi

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Bay's skills self-update lifecycle (/v1/skills): the rules are the service's (sandboxes/service/skills.go); these
// handlers decode Bay's requests (422 like FastAPI for a malformed one), call the service and encode its records,
// which already have Bay's shapes.

func (h *Handler) skillRoutes() []route {
	K := "/v1/skills"
	return []route{
		{"POST", K + "/payloads", "Store a skill payload (JSON object or array); answers its blob: ref", false, true, h.createSkillPayload},
		{"GET", K + "/payloads/{ref...}", "Read a skill payload by its blob: ref", false, true, h.getSkillPayload},
		{"POST", K + "/candidates", "Make a skill candidate from executions", false, true, h.createSkillCandidate},
		{"GET", K + "/candidates", "List skill candidates", false, true, h.listSkillCandidates},
		{"GET", K + "/candidates/{cid}", "Get a skill candidate", false, true, h.getSkillCandidate},
		{"DELETE", K + "/candidates/{cid}", "Soft-delete a skill candidate (409 while an active release uses it)", false, true, h.deleteSkillCandidate},
		{"POST", K + "/candidates/{cid}/evaluate", "Record an evaluation of a candidate", false, true, h.evaluateSkillCandidate},
		{"POST", K + "/candidates/{cid}/promote", "Promote a passing candidate to a versioned release", false, true, h.promoteSkillCandidate},
		{"GET", K + "/releases", "List skill releases", false, true, h.listSkillReleases},
		{"GET", K + "/releases/{rid}/health", "A release's health against the version before it", false, true, h.skillReleaseHealth},
		{"POST", K + "/releases/{rid}/rollback", "Roll a release back to the version before it", false, true, h.rollbackSkillRelease},
		{"DELETE", K + "/releases/{rid}", "Soft-delete a skill release", false, true, h.deleteSkillRelease},
		{"POST", "/v1/sandboxes/{id}/browser/skills/{key}/run", "Replay the active release of a browser skill (skills_browser.go)", false, true, h.runBrowserSkill},
	}
}

// optFloat reads a pydantic lax float: a JSON number or a numeric string; nil when absent or null.
func (f *fields) optFloat(name string) *float64 {
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	var x float64
	var err error
	switch t := v.(type) {
	case json.Number:
		x, err = t.Float64()
	case string:
		x, err = strconv.ParseFloat(strings.TrimSpace(t), 64)
	default:
		f.issue("float_type", f.loc(name), "Input should be a valid number", v, nil)
		return nil
	}
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		f.issue("float_parsing", f.loc(name), "Input should be a valid number, unable to parse string as a number", v, nil)
		return nil
	}
	return &x
}

// optObject reads a JSON object (dict[str, Any] | None).
func (f *fields) optObject(name string) map[string]any {
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		f.issue("dict_type", f.loc(name), "Input should be a valid dictionary", v, nil)
		return nil
	}
	return m
}

// requiredBool reads a required boolean.
func (f *fields) requiredBool(name string) bool {
	if _, ok := f.get(name); !ok {
		f.issue("missing", f.loc(name), "Field required", f.input(), nil)
		return false
	}
	return f.boolean(name, false)
}

func (h *Handler) createSkillPayload(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, true)
	kind := f.str("kind", false, "generic")
	raw, ok := f.get("payload")
	switch {
	case !ok:
		f.issue("missing", f.loc("payload"), "Field required", f.input(), nil)
	default:
		switch raw.(type) {
		case map[string]any, []any:
		default:
			f.issue("dict_type", f.loc("payload"), "Input should be a valid dictionary or list", raw, nil)
		}
	}
	if kind == "" {
		f.issue("string_too_short", f.loc("kind"), "String should have at least 1 character", kind, map[string]any{"min_length": 1})
	}
	if !decodeOrFail(w, f) {
		return
	}
	b, err := json.Marshal(raw)
	if err != nil {
		writeError(w, r, service.Errorf(service.CodeValidation, "payload: %v", err))
		return
	}
	blob, err := h.svc.CreateSkillPayload(r.Context(), p, kind, b)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"payload_ref": blob.Ref(), "kind": blob.Kind})
}

func (h *Handler) getSkillPayload(w http.ResponseWriter, r *http.Request, p service.Principal) {
	ref := r.PathValue("ref")
	blob, err := h.svc.SkillPayload(r.Context(), p, ref)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"payload_ref": ref, "kind": blob.Kind, "payload": blob.Payload})
}

func (h *Handler) createSkillCandidate(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, true)
	req := service.NewSkillCandidate{
		SkillKey:           f.str("skill_key", true, ""),
		SourceExecutionIDs: f.strList("source_execution_ids", 0),
		ScenarioKey:        f.optStr("scenario_key"),
		PayloadRef:         f.optStr("payload_ref"),
		Summary:            f.optStr("summary"),
		UsageNotes:         f.optStr("usage_notes"),
		Preconditions:      f.optObject("preconditions"),
		Postconditions:     f.optObject("postconditions"),
	}
	if _, ok := f.get("source_execution_ids"); !ok {
		f.issue("missing", f.loc("source_execution_ids"), "Field required", f.input(), nil)
	}
	if !decodeOrFail(w, f) {
		return
	}
	c, err := h.svc.CreateSkillCandidate(r.Context(), p, req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// skillQuery reads the list routes' filters and page (limit 1..500, default 100; offset >= 0).
func skillQuery(r *http.Request) (*fields, service.SkillQuery) {
	q := queryFields(r)
	sq := service.SkillQuery{
		Status:     q.str("status", false, ""),
		Stage:      q.str("stage", false, ""),
		SkillKey:   q.str("skill_key", false, ""),
		ActiveOnly: q.boolean("active_only", false),
		Limit:      int(q.integer("limit", service.DefaultSkillPage, bound(1), bound(service.MaxSkillPageLimit), false)),
		Offset:     int(q.integer("offset", 0, bound(0), nil, false)),
	}
	return q, sq
}

func (h *Handler) listSkillCandidates(w http.ResponseWriter, r *http.Request, p service.Principal) {
	q, sq := skillQuery(r)
	if !decodeOrFail(w, q) {
		return
	}
	items, total, err := h.svc.SkillCandidates(r.Context(), p, sq)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "total": total})
}

func (h *Handler) getSkillCandidate(w http.ResponseWriter, r *http.Request, p service.Principal) {
	c, err := h.svc.SkillCandidate(r.Context(), p, r.PathValue("cid"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (h *Handler) evaluateSkillCandidate(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, true)
	req := service.NewSkillEvaluation{
		Passed:      f.requiredBool("passed"),
		Score:       f.optFloat("score"),
		BenchmarkID: f.optStr("benchmark_id"),
		Report:      f.optStr("report"),
	}
	if !decodeOrFail(w, f) {
		return
	}
	ev, err := h.svc.EvaluateSkillCandidate(r.Context(), p, r.PathValue("cid"), req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ev)
}

func (h *Handler) promoteSkillCandidate(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, false)
	req := service.SkillPromotion{
		Stage:              f.str("stage", false, service.StageCanary),
		UpgradeOfReleaseID: f.optStr("upgrade_of_release_id"),
		UpgradeReason:      f.optStr("upgrade_reason"),
		ChangeSummary:      f.optStr("change_summary"),
	}
	if !decodeOrFail(w, f) {
		return
	}
	rel, err := h.svc.PromoteSkillCandidate(r.Context(), p, r.PathValue("cid"), req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rel)
}

func (h *Handler) listSkillReleases(w http.ResponseWriter, r *http.Request, p service.Principal) {
	q, sq := skillQuery(r)
	if !decodeOrFail(w, q) {
		return
	}
	items, total, err := h.svc.SkillReleases(r.Context(), p, sq)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "total": total})
}

func (h *Handler) skillReleaseHealth(w http.ResponseWriter, r *http.Request, p service.Principal) {
	health, err := h.svc.SkillReleaseHealth(r.Context(), p, r.PathValue("rid"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, health)
}

func (h *Handler) rollbackSkillRelease(w http.ResponseWriter, r *http.Request, p service.Principal) {
	rel, err := h.svc.RollbackSkillRelease(r.Context(), p, r.PathValue("rid"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rel)
}

// deletion is Bay's answer to a soft delete.
func deletion(id string, d *service.SkillDeletion) map[string]any {
	var at *string
	if d.DeletedAt != nil {
		s := d.DeletedAt.UTC().Format(time.RFC3339Nano)
		at = &s
	}
	return map[string]any{"id": id, "deleted_at": at, "deleted_by": d.DeletedBy, "delete_reason": d.DeleteReason}
}

func (h *Handler) deleteSkillCandidate(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, false)
	reason := f.optStr("reason")
	if !decodeOrFail(w, f) {
		return
	}
	id := r.PathValue("cid")
	d, err := h.svc.DeleteSkillCandidate(r.Context(), p, id, reason)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deletion(id, d))
}

func (h *Handler) deleteSkillRelease(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, false)
	reason := f.optStr("reason")
	if !decodeOrFail(w, f) {
		return
	}
	id := r.PathValue("rid")
	d, err := h.svc.DeleteSkillRelease(r.Context(), p, id, reason)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deletion(id, d))
}
