package bayapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestBrowserTraces pins Bay's browser evidence: include_trace answers a blob: ref that GET S/browser/traces/{ref}
// returns and the history entry names (payload_ref); learn alone keeps the trace on the entry without answering
// the ref and marks it pending; neither keeps nothing and marks it skipped; a batch's trace is Bay's
// browser_batch_trace with the run's counts, a failed batch's included.
func TestBrowserTraces(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"profile": "browser-python"})
	S := "/v1/sandboxes/" + id
	entry := func(eid string) map[string]any {
		t.Helper()
		st, out, _ := a.call(t, "GET", S+"/history/"+eid, keyAlice, nil)
		if st != 200 {
			t.Fatalf("history %s: %d %v", eid, st, out)
		}
		return out
	}
	trace := func(ref string) map[string]any {
		t.Helper()
		st, out, _ := a.call(t, "GET", S+"/browser/traces/"+ref, keyAlice, nil)
		if st != 200 || out["trace_ref"] != ref {
			t.Fatalf("trace %s: %d %v", ref, st, out)
		}
		return out["trace"].(map[string]any)
	}

	t.Run("include_trace and learn", func(t *testing.T) {
		_, out, _ := a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "open about:blank", "description": "round trip",
			"tags": "skill:e2e,trace", "learn": true, "include_trace": true})
		ref, _ := out["trace_ref"].(string)
		if !strings.HasPrefix(ref, "blob:blob-") || !strings.HasPrefix(out["execution_id"].(string), "exec-") {
			t.Fatalf("exec: %v", out)
		}
		e := entry(out["execution_id"].(string))
		if e["exec_type"] != "browser" || e["learn_enabled"] != true || e["learn_status"] != "pending" || e["payload_ref"] != ref ||
			e["description"] != "round trip" || e["tags"] != "skill:e2e,trace" || e["code"] != "open about:blank" {
			t.Errorf("history entry: %v", e)
		}
		tr := trace(ref)
		steps := tr["steps"].([]any)
		step := steps[0].(map[string]any)
		if tr["kind"] != "browser_exec_trace" || len(steps) != 1 || step["cmd"] != "open about:blank" || step["kind"] != "individual_action" ||
			step["stdout"] != "about:blank\n" || step["exit_code"] != 0.0 || step["step_index"] != 0.0 {
			t.Errorf("trace: %v", tr)
		}
	})
	t.Run("learn only keeps the ref on the entry", func(t *testing.T) {
		_, out, _ := a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "get title", "learn": true, "include_trace": false})
		if out["trace_ref"] != nil {
			t.Fatalf("learn alone answered a ref: %v", out)
		}
		e := entry(out["execution_id"].(string))
		ref, _ := e["payload_ref"].(string)
		if !strings.HasPrefix(ref, "blob:") || e["learn_status"] != "pending" {
			t.Fatalf("entry: %v", e)
		}
		if tr := trace(ref); tr["kind"] != "browser_exec_trace" {
			t.Errorf("trace: %v", tr)
		}
	})
	t.Run("neither keeps nothing", func(t *testing.T) {
		_, out, _ := a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "get url"})
		e := entry(out["execution_id"].(string))
		if out["trace_ref"] != nil || e["payload_ref"] != nil || e["learn_enabled"] != false || e["learn_status"] != "skipped" {
			t.Errorf("exec %v, entry %v", out, e)
		}
	})
	t.Run("a failed batch", func(t *testing.T) {
		_, out, _ := a.call(t, "POST", S+"/browser/exec_batch", keyAlice, map[string]any{"commands": []string{"open about:blank", "nonexistent-subcommand", "get title"},
			"learn": true, "include_trace": true, "tags": "failure"})
		ref, _ := out["trace_ref"].(string)
		if out["success"] != false || out["total_steps"] != 3.0 || out["completed_steps"] != 2.0 || ref == "" {
			t.Fatalf("batch: %v", out)
		}
		e := entry(out["execution_id"].(string))
		if e["exec_type"] != "browser_batch" || e["success"] != false || e["payload_ref"] != ref || e["learn_enabled"] != true ||
			e["code"] != "open about:blank\nnonexistent-subcommand\nget title" {
			t.Errorf("entry: %v", e)
		}
		tr := trace(ref)
		steps := tr["steps"].([]any)
		if tr["kind"] != "browser_batch_trace" || tr["success"] != false || tr["total_steps"] != 3.0 || tr["completed_steps"] != 2.0 || len(steps) != 2 {
			t.Fatalf("trace: %v", tr)
		}
		if s := steps[1].(map[string]any); s["exit_code"] != 127.0 || s["step_index"] != 1.0 || s["duration_ms"] == nil {
			t.Errorf("failed step: %v", s)
		}
	})
	t.Run("python runs carry no learning marks", func(t *testing.T) {
		_, out, _ := a.call(t, "POST", S+"/python/exec", keyAlice, map[string]any{"code": "1"})
		if e := entry(out["execution_id"].(string)); e["learn_enabled"] != false || e["learn_status"] != nil || e["payload_ref"] != nil {
			t.Errorf("entry: %v", e)
		}
	})
	t.Run("refs that name nothing", func(t *testing.T) {
		if st, out, _ := a.call(t, "GET", S+"/browser/traces/blob:missing-trace", keyAlice, nil); st != 404 || errCode(out) != "not_found" {
			t.Errorf("unknown blob: %d %v", st, out)
		}
		if st, out, _ := a.call(t, "GET", S+"/browser/traces/nope", keyAlice, nil); st != 400 || errCode(out) != "validation_error" {
			t.Errorf("not a blob ref: %d %v", st, out)
		}
	})
}

// TestBrowserTraceOfAnotherTenant is the attack: Bob, who learnt (or guessed) one of Alice's trace refs, asks for
// it through Alice's sandbox and through his own. Both are not_found; Alice still reads it. A trace is reachable
// only through the sandbox that recorded it, whose owner the service checks.
func TestBrowserTraceOfAnotherTenant(t *testing.T) {
	a := newTestAPI(t)
	alice := a.create(t, keyAlice, map[string]any{"profile": "browser-python"})
	bob := a.create(t, keyBob, map[string]any{"profile": "browser-python"})
	_, out, _ := a.call(t, "POST", "/v1/sandboxes/"+alice+"/browser/exec", keyAlice, map[string]any{"cmd": "get title", "include_trace": true})
	ref, _ := out["trace_ref"].(string)
	if ref == "" {
		t.Fatalf("no ref: %v", out)
	}
	for _, path := range []string{"/v1/sandboxes/" + alice + "/browser/traces/" + ref, "/v1/sandboxes/" + bob + "/browser/traces/" + ref} {
		if st, out, _ := a.call(t, "GET", path, keyBob, nil); st != 404 || errCode(out) != "not_found" || strings.Contains(mustJSON(out), "Example Domain") {
			t.Errorf("bob %s: %d %v", path, st, out)
		}
	}
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes/"+alice+"/browser/traces/"+ref, keyAlice, nil); st != 200 {
		t.Errorf("alice: %d", st)
	}
	if _, err := a.h.svc.TracePayload(t.Context(), service.Principal{Owner: "bob"}, ref); err == nil {
		t.Errorf("bob read alice's trace as a payload")
	}
	if got, err := a.h.svc.TracePayload(t.Context(), service.Principal{Owner: "default"}, ref); err != nil || !strings.Contains(string(got), "Example Domain") {
		t.Errorf("alice's payload: %s %v", got, err)
	}
}

// TestBrowserTraceBounded: a page whose text is far larger than a trace may be (tenant content) is kept cut to
// sandboxes.MaxTraceBytes, marked truncated, and still a trace; the run's own answer is unchanged.
func TestBrowserTraceBounded(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"profile": "browser-python"})
	a.agent.pageText = strings.Repeat("é\x00<", 400<<10) // 1.6 MB of text that JSON escapes to more
	_, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/browser/exec_batch", keyAlice, map[string]any{"commands": []string{"get text", "get text"}, "include_trace": true})
	ref, _ := out["trace_ref"].(string)
	if len(out["results"].([]any)[0].(map[string]any)["stdout"].(string)) < 1<<20 || ref == "" {
		t.Fatalf("the answer was cut or has no ref: %d results", len(out["results"].([]any)))
	}
	b, ok, err := a.store.Trace(id, ref)
	if err != nil || !ok || len(b) > sandboxes.MaxTraceBytes {
		t.Fatalf("stored trace: %d bytes, %v %v", len(b), ok, err)
	}
	var tr map[string]any
	if err := json.Unmarshal(b, &tr); err != nil || tr["truncated"] != true || tr["kind"] != "browser_batch_trace" || len(tr["steps"].([]any)) != 2 {
		t.Fatalf("trace: %v %v", err, tr["truncated"])
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
