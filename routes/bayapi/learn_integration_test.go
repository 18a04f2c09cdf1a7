package bayapi_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
)

// checkBrowserLearning continues TestBrowserAgainstGateway in its browser sandbox (real Chromium): a trace is read
// back as a skill payload; a learn run of three actions becomes, through the gateway's learning pass, a browser
// candidate released as an automatic canary; and the browser skill run replays it with include_trace answering a
// trace of the replay.
func checkBrowserLearning(t *testing.T, ctx context.Context, c *client.Client, sbID, traceRef string) {
	t.Helper()
	S := "/v1/sandboxes/" + sbID
	var payload struct {
		PayloadRef string          `json:"payload_ref"`
		Kind       string          `json:"kind"`
		Payload    json.RawMessage `json:"payload"`
	}
	var trace struct {
		Trace json.RawMessage `json:"trace"`
	}
	if err := c.Do(ctx, "GET", "/v1/skills/payloads/"+traceRef, nil, &payload); err != nil || payload.PayloadRef != traceRef ||
		payload.Kind != "browser_trace" {
		t.Fatalf("the trace as a payload: %+v %v", payload, err)
	}
	if err := c.Do(ctx, "GET", S+"/browser/traces/"+traceRef, nil, &trace); err != nil || !jsonEqual(trace.Trace, payload.Payload) {
		t.Fatalf("the payload %s is not the trace %s (%v)", payload.Payload, trace.Trace, err)
	}

	commands := []string{"open data:text/html,<title>Learnt</title>", "eval document.title = 'Changed'", "eval document.title"}
	var run struct {
		ExecutionID string `json:"execution_id"`
		Success     bool   `json:"success"`
	}
	if err := c.Do(ctx, "POST", S+"/browser/exec_batch", map[string]any{"commands": commands, "timeout": 120,
		"description": "Change the title", "tags": "skill:gw-learnt", "learn": true}, &run); err != nil || !run.Success {
		t.Fatalf("learn run: %+v %v", run, err)
	}
	// The run wakes the learning pass; wait for it to mark the run.
	var e struct {
		LearnStatus      *string `json:"learn_status"`
		LearnError       *string `json:"learn_error"`
		LearnProcessedAt *string `json:"learn_processed_at"`
	}
	for {
		if err := c.Do(ctx, "GET", S+"/history/"+run.ExecutionID, nil, &e); err != nil {
			t.Fatal(err)
		}
		if e.LearnStatus != nil && *e.LearnStatus != "pending" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the learn run was never learned: %+v", e)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if *e.LearnStatus != "processed" || e.LearnError != nil || e.LearnProcessedAt == nil {
		t.Fatalf("the learn run: %+v", e)
	}
	var cands struct {
		Items []struct {
			ID                  string   `json:"id"`
			SkillType           string   `json:"skill_type"`
			Status              string   `json:"status"`
			ScenarioKey         *string  `json:"scenario_key"`
			AutoReleaseEligible bool     `json:"auto_release_eligible"`
			SourceExecutionIDs  []string `json:"source_execution_ids"`
		} `json:"items"`
		Total int `json:"total"`
	}
	if err := c.Do(ctx, "GET", "/v1/skills/candidates?skill_key=gw-learnt", nil, &cands); err != nil || cands.Total != 1 {
		t.Fatalf("candidates: %+v %v", cands, err)
	}
	cand := cands.Items[0]
	if cand.SkillType != "browser" || cand.Status != "promoted_canary" || !cand.AutoReleaseEligible || cand.ScenarioKey == nil ||
		*cand.ScenarioKey != "change-the-title" || len(cand.SourceExecutionIDs) != 1 || cand.SourceExecutionIDs[0] != run.ExecutionID {
		t.Fatalf("the learned candidate: %+v", cand)
	}
	var rels struct {
		Items []struct {
			ID          string `json:"id"`
			Stage       string `json:"stage"`
			ReleaseMode string `json:"release_mode"`
			CandidateID string `json:"candidate_id"`
			IsActive    bool   `json:"is_active"`
		} `json:"items"`
	}
	if err := c.Do(ctx, "GET", "/v1/skills/releases?"+url.Values{"skill_key": {"gw-learnt"}}.Encode(), nil, &rels); err != nil || len(rels.Items) != 1 ||
		rels.Items[0].Stage != "canary" || rels.Items[0].ReleaseMode != "auto" || !rels.Items[0].IsActive || rels.Items[0].CandidateID != cand.ID {
		t.Fatalf("releases: %+v %v", rels, err)
	}

	var replay struct {
		ReleaseID      string  `json:"release_id"`
		Success        bool    `json:"success"`
		CompletedSteps int     `json:"completed_steps"`
		TraceRef       *string `json:"trace_ref"`
		Results        []struct {
			Cmd    string `json:"cmd"`
			Stdout string `json:"stdout"`
		} `json:"results"`
	}
	if err := c.Do(ctx, "POST", S+"/browser/skills/gw-learnt/run", map[string]any{"timeout": 120, "include_trace": true}, &replay); err != nil ||
		!replay.Success || replay.CompletedSteps != 3 || replay.ReleaseID != rels.Items[0].ID || replay.TraceRef == nil ||
		!strings.Contains(replay.Results[2].Stdout, "Changed") {
		t.Fatalf("the learned skill's replay: %+v %v", replay, err)
	}
	var replayTrace struct {
		Trace struct {
			Kind  string `json:"kind"`
			Steps []struct {
				Cmd string `json:"cmd"`
			} `json:"steps"`
		} `json:"trace"`
	}
	if err := c.Do(ctx, "GET", S+"/browser/traces/"+*replay.TraceRef, nil, &replayTrace); err != nil || replayTrace.Trace.Kind != "browser_batch_trace" ||
		len(replayTrace.Trace.Steps) != 3 || replayTrace.Trace.Steps[1].Cmd != commands[1] {
		t.Fatalf("the replay's trace: %+v %v", replayTrace, err)
	}
}

// jsonEqual reports whether two JSON documents hold the same value.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ea, _ := json.Marshal(va)
	eb, _ := json.Marshal(vb)
	return string(ea) == string(eb)
}
