package bayapi

import (
	"net/http"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// POST S/browser/skills/{key}/run replays the browser commands of the active release of key (the service resolves
// them: sandboxes/service BrowserSkill) as a batch, and records it tagged skill:<key>, release:<id>, stage:<stage>,
// so the release's health counts it; include_trace keeps its trace (trace_ref), as exec_batch does.
func (h *Handler) runBrowserSkill(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id, key := r.PathValue("id"), r.PathValue("key")
	f := bodyFields(r, false)
	timeout := f.integer("timeout", 60, bound(1), bound(600), false)
	stopOnError := f.boolean("stop_on_error", true)
	includeTrace := f.boolean("include_trace", false)
	meta := readExecMeta(f)
	if !decodeOrFail(w, f) {
		return
	}
	b, err := h.svc.OpenBrowser(r.Context(), p, id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rel, commands, err := h.svc.BrowserSkill(r.Context(), p, key)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out, err := h.runBrowserBatch(r, b, commands, timeout, stopOnError)
	if err != nil {
		writeError(w, r, err)
		return
	}
	tags := ""
	if meta.Tags != nil {
		tags = *meta.Tags
	}
	merged := service.MergeSkillTags(tags, "skill:"+key, "release:"+rel.ID, "stage:"+rel.Stage)
	meta.Tags = &merged
	// Recorded as the batch it is; include_trace keeps its trace and answers the ref, as exec_batch does.
	eid, ref := h.svc.RecordBrowser(r.Context(), id, service.BrowserRun{Batch: true, Commands: commands, Steps: out.steps, Success: out.success, Elapsed: out.elapsed},
		service.BrowserEvidence{ExecMeta: meta.ExecMeta, IncludeTrace: includeTrace})
	writeJSON(w, http.StatusOK, map[string]any{
		"skill_key": key, "release_id": rel.ID, "execution_id": eid, "execution_time_ms": out.elapsed.Milliseconds(),
		"trace_ref": ref, "results": out.results, "total_steps": len(commands), "completed_steps": len(out.results),
		"success": out.success, "duration_ms": out.elapsed.Milliseconds(),
	})
}
