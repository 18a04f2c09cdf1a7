package bayapi

import (
	"net/http"
	"slices"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Bay's POST /v1/admin/gc/run: one collection now, by the lifecycle Manager's own collector (sandboxes/gc.go), and
// Bay's per-task answer; GET /v1/admin/gc/status: the collector's settings. Bay's four tasks are parts of our one
// pass:
//   - idle_session: sandboxes past their idle deadline are stopped (or idle-paused); the workspace stays;
//   - expired_sandbox: sandboxes past their TTL are removed, with their managed cargo;
//   - orphan_cargo: managed cargo volumes no sandbox owns are removed; a cargo made by POST /v1/cargos
//     (external) is never one. Bay's older name, orphan_workspace, which our docs named, selects it too;
//   - orphan_container: containers no sandbox owns are removed.
//
// Our warm pool's recycling is a fifth, warm_pool, listed when no tasks are named or when it is named (Bay keeps
// the results of the names asked for, so a Bay client that names its tasks never sees it). Unlike Bay, the routes
// are for admin keys only: the pass acts on every owner's sandboxes. A call made while a pass runs waits for it and
// runs its own, where Bay answers 423.

// GCTaskResult is one task's part of a collection, as Bay answers it.
type GCTaskResult struct {
	TaskName     string   `json:"task_name"`
	CleanedCount int      `json:"cleaned_count"`
	SkippedCount int      `json:"skipped_count"`
	Errors       []string `json:"errors"`
}

// GCRunResponse is Bay's answer to POST /v1/admin/gc/run.
type GCRunResponse struct {
	Results      []GCTaskResult `json:"results"`
	TotalCleaned int            `json:"total_cleaned"`
	TotalErrors  int            `json:"total_errors"`
	DurationMS   int64          `json:"duration_ms"`
}

// gcTasks are Bay's task names in the order its scheduler runs them, with what of our report each one counts.
var gcTasks = []struct {
	name    string
	cleaned func(sandboxes.GCReport) int
	errs    []sandboxes.GCTask
}{
	{"idle_session", func(r sandboxes.GCReport) int { return r.IdleStopped + r.IdlePaused }, []sandboxes.GCTask{sandboxes.GCIdle}},
	{"expired_sandbox", func(r sandboxes.GCReport) int { return r.Expired }, []sandboxes.GCTask{sandboxes.GCExpired}},
	{"orphan_cargo", func(r sandboxes.GCReport) int { return r.OrphanVolumes }, []sandboxes.GCTask{sandboxes.GCOrphanVolumes}},
	{"orphan_container", func(r sandboxes.GCReport) int { return r.OrphanContainers }, []sandboxes.GCTask{sandboxes.GCOrphanContainers}},
	{"warm_pool", func(r sandboxes.GCReport) int { return r.WarmRecycled }, []sandboxes.GCTask{sandboxes.GCWarm}},
}

func (h *Handler) adminGCRun(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, false)
	named := f.strList("tasks", 0) // absent or null: every task; unknown names are ignored, as Bay does
	if !decodeOrFail(w, f) {
		return
	}
	start := time.Now()
	rep, err := h.svc.CollectGarbage(r.Context(), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, gcAnswer(rep, named, time.Since(start)))
}

// gcAnswer shapes a report as Bay's answer, keeping the tasks named (nil: all, with our warm_pool).
func gcAnswer(rep sandboxes.GCReport, named []string, took time.Duration) GCRunResponse {
	out := GCRunResponse{Results: []GCTaskResult{}, DurationMS: took.Milliseconds()}
	for _, t := range gcTasks {
		if named != nil && !slices.Contains(named, t.name) && !(t.name == "orphan_cargo" && slices.Contains(named, "orphan_workspace")) {
			continue
		}
		res := GCTaskResult{TaskName: t.name, CleanedCount: t.cleaned(rep), Errors: []string{}}
		for _, fl := range rep.Failures {
			if slices.Contains(t.errs, fl.Task) {
				res.Errors = append(res.Errors, fl.Err)
			}
		}
		out.Results = append(out.Results, res)
		out.TotalCleaned += res.CleanedCount
		out.TotalErrors += len(res.Errors)
	}
	return out
}

// GCStatusResponse is Bay's answer to GET /v1/admin/gc/status.
type GCStatusResponse struct {
	Enabled         bool                       `json:"enabled"`
	IsRunning       bool                       `json:"is_running"`
	InstanceID      string                     `json:"instance_id"`
	IntervalSeconds int                        `json:"interval_seconds"`
	Tasks           map[string]map[string]bool `json:"tasks"`
}

func (h *Handler) adminGCStatus(w http.ResponseWriter, r *http.Request, p service.Principal) {
	st, err := h.svc.GCStatus(r.Context(), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, gcStatusAnswer(st))
}

// gcStatusAnswer shapes the collector's state as Bay's status. Our loop always runs (enabled); on a fleet's gateway
// that does not hold the GC lease only the warm pool's recycling is enabled, the rest runs on the holder.
func gcStatusAnswer(st sandboxes.GCState) GCStatusResponse {
	tasks := map[string]map[string]bool{}
	for _, t := range gcTasks {
		tasks[t.name] = map[string]bool{"enabled": st.Leader || t.name == "warm_pool"}
	}
	return GCStatusResponse{Enabled: true, IsRunning: st.Running, InstanceID: st.Instance, IntervalSeconds: int(st.Interval.Seconds()), Tasks: tasks}
}
