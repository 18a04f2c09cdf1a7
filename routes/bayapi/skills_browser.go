package bayapi

import (
	"net/http"
	"time"

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
	budget := time.Duration(timeout) * time.Second
	ctx, cancel := contextWithTimeout(r, budget+service.AgentGrace)
	defer cancel()
	start := time.Now()
	deadline := start.Add(budget)
	results := []map[string]any{}
	var steps []service.BrowserStep
	success := true
	for i, cmd := range commands {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			results = append(results, map[string]any{"cmd": cmd, "stdout": "", "stderr": "batch timeout exceeded", "exit_code": 124, "step_index": i, "duration_ms": 0})
			zero := int64(0)
			steps = append(steps, service.BrowserStep{Cmd: cmd, Stderr: "batch timeout exceeded", ExitCode: 124, DurationMS: &zero})
			success = false
			break
		}
		stepStart := time.Now()
		step, err := h.runBrowserCommand(ctx, b, cmd, remaining)
		if err != nil {
			writeError(w, r, err)
			return
		}
		ms := time.Since(stepStart).Milliseconds()
		results = append(results, map[string]any{"cmd": cmd, "stdout": step.stdout, "stderr": step.stderr, "exit_code": step.exit,
			"step_index": i, "duration_ms": ms})
		steps = append(steps, service.BrowserStep{Cmd: cmd, Stdout: step.stdout, Stderr: step.stderr, ExitCode: step.exit, DurationMS: &ms})
		if step.exit != 0 {
			success = false
			if stopOnError {
				break
			}
		}
	}
	elapsed := time.Since(start)
	tags := ""
	if meta.Tags != nil {
		tags = *meta.Tags
	}
	merged := service.MergeSkillTags(tags, "skill:"+key, "release:"+rel.ID, "stage:"+rel.Stage)
	meta.Tags = &merged
	// Recorded as the batch it is; include_trace keeps its trace and answers the ref, as exec_batch does.
	eid, ref := h.svc.RecordBrowser(r.Context(), id, service.BrowserRun{Batch: true, Commands: commands, Steps: steps, Success: success, Elapsed: elapsed},
		service.BrowserEvidence{ExecMeta: meta.ExecMeta, IncludeTrace: includeTrace})
	writeJSON(w, http.StatusOK, map[string]any{
		"skill_key": key, "release_id": rel.ID, "execution_id": eid, "execution_time_ms": elapsed.Milliseconds(),
		"trace_ref": ref, "results": results, "total_steps": len(commands), "completed_steps": len(results),
		"success": success, "duration_ms": elapsed.Milliseconds(),
	})
}
