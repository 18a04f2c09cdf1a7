package bayapi

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// shellExec runs command in sandbox id with tags and returns its execution_id.
func (a *testAPI) shellExec(t *testing.T, key, id, command, tags string) string {
	t.Helper()
	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/shell/exec", key, map[string]any{"command": command, "tags": tags})
	eid, _ := out["execution_id"].(string)
	if st != 200 || eid == "" {
		t.Fatalf("shell exec: %d %v", st, out)
	}
	return eid
}

// skillCall sends a skills request and fails the test unless it answers want.
func (a *testAPI) skillCall(t *testing.T, want int, method, path, key string, body any) map[string]any {
	t.Helper()
	st, out, _ := a.call(t, method, path, key, body)
	if st != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, st, out, want)
	}
	return out
}

// TestSkillLifecycle runs Bay's lifecycle test's sequence: candidate, evaluation, promotion (stable v1), a second
// candidate promoted as canary v2 upgrading v1, one active release, rollback to a v3 that is rollback_of v2, and the
// rolled-back candidate's status.
func TestSkillLifecycle(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"ttl": 600})
	execA := a.shellExec(t, keyAlice, id, "echo candidate-a", "skills,evidence")

	ca := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{
		"skill_key": "csv-loader", "source_execution_ids": []string{execA}, "scenario_key": "etl.csv",
		"payload_ref": "s3://skills/csv-loader/a", "summary": "Load CSV", "usage_notes": "needs creds",
		"preconditions": map[string]any{"runtime": "python"}, "postconditions": map[string]any{"table": "created"},
	})
	if ca["status"] != "draft" || ca["skill_type"] != "code" || ca["preconditions"].(map[string]any)["runtime"] != "python" ||
		ca["source_execution_ids"].([]any)[0] != execA || ca["created_by"] == nil {
		t.Fatalf("candidate: %v", ca)
	}
	ev := a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+ca["id"].(string)+"/evaluate", keyAlice,
		map[string]any{"passed": true, "score": 0.93, "benchmark_id": "bench-csv-v1", "report": "pass"})
	if ev["passed"] != true || ev["score"] != 0.93 || ev["candidate_id"] != ca["id"] {
		t.Fatalf("evaluation: %v", ev)
	}
	ra := a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+ca["id"].(string)+"/promote", keyAlice,
		map[string]any{"stage": "stable", "upgrade_reason": "manual_promote", "change_summary": "Baseline"})
	if ra["version"] != float64(1) || ra["stage"] != "stable" || ra["is_active"] != true || ra["upgrade_of_release_id"] != nil ||
		ra["release_mode"] != "manual" {
		t.Fatalf("release a: %v", ra)
	}

	execB := a.shellExec(t, keyAlice, id, "echo candidate-b", "")
	cb := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{"skill_key": "csv-loader", "source_execution_ids": []string{execB}})
	a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+cb["id"].(string)+"/evaluate", keyAlice, map[string]any{"passed": true, "score": 0.98})
	rb := a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+cb["id"].(string)+"/promote", keyAlice,
		map[string]any{"stage": "canary", "upgrade_of_release_id": ra["id"]})
	if rb["version"] != float64(2) || rb["upgrade_of_release_id"] != ra["id"] || rb["is_active"] != true {
		t.Fatalf("release b: %v", rb)
	}
	active := a.skillCall(t, 200, "GET", "/v1/skills/releases?skill_key=csv-loader&active_only=true", keyAlice, nil)
	if active["total"] != float64(1) || active["items"].([]any)[0].(map[string]any)["id"] != rb["id"] {
		t.Fatalf("active releases: %v", active)
	}
	rc := a.skillCall(t, 200, "POST", "/v1/skills/releases/"+rb["id"].(string)+"/rollback", keyAlice, nil)
	if rc["rollback_of"] != rb["id"] || rc["version"] != float64(3) || rc["is_active"] != true || rc["candidate_id"] != ca["id"] ||
		rc["stage"] != "stable" {
		t.Fatalf("rollback: %v", rc)
	}
	if got := a.skillCall(t, 200, "GET", "/v1/skills/candidates/"+cb["id"].(string), keyAlice, nil); got["status"] != "rolled_back" {
		t.Errorf("rolled-back candidate: %v", got)
	}
	// Rolling back the first version has nothing before it.
	if out := a.skillCall(t, 409, "POST", "/v1/skills/releases/"+ra["id"].(string)+"/rollback", keyAlice, nil); errCode(out) != "conflict" {
		t.Errorf("rollback of v1: %v", out)
	}
}

// TestSkillListsAndValidation: filters, pages, and the typed answers to bad input (Bay's 400s and FastAPI's 422s).
func TestSkillListsAndValidation(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"ttl": 600})
	e1, e2 := a.shellExec(t, keyAlice, id, "true", ""), a.shellExec(t, keyAlice, id, "true", "")
	ca := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{"skill_key": "loader-a", "source_execution_ids": []string{e1}})
	a.clock.Advance(time.Second)
	cb := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{"skill_key": "loader-b", "source_execution_ids": []string{e2}})
	a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+cb["id"].(string)+"/evaluate", keyAlice, map[string]any{"passed": false, "score": 0.12})

	for _, tc := range []struct {
		query string
		total float64
		first any
	}{
		{"skill_key=loader-a", 1, ca["id"]},
		{"status=rejected", 1, cb["id"]},
		{"limit=1&offset=0", 2, cb["id"]}, // newest first
		{"limit=1&offset=1", 2, ca["id"]},
	} {
		out := a.skillCall(t, 200, "GET", "/v1/skills/candidates?"+tc.query, keyAlice, nil)
		items := out["items"].([]any)
		if out["total"] != tc.total || len(items) != 1 || items[0].(map[string]any)["id"] != tc.first {
			t.Errorf("candidates?%s: %v", tc.query, out)
		}
	}

	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"unknown status", "GET", "/v1/skills/candidates?status=unknown", nil, 400, "validation_error"},
		{"unknown stage", "GET", "/v1/skills/releases?stage=unknown", nil, 400, "validation_error"},
		{"limit too big", "GET", "/v1/skills/candidates?limit=501", nil, 422, ""},
		{"missing execution", "POST", "/v1/skills/candidates", map[string]any{"skill_key": "bad", "source_execution_ids": []string{"exec-missing"}}, 400, "validation_error"},
		{"no executions", "POST", "/v1/skills/candidates", map[string]any{"skill_key": "bad", "source_execution_ids": []string{}}, 400, "validation_error"},
		{"blank key", "POST", "/v1/skills/candidates", map[string]any{"skill_key": "  ", "source_execution_ids": []string{e1}}, 400, "validation_error"},
		{"no key", "POST", "/v1/skills/candidates", map[string]any{"source_execution_ids": []string{e1}}, 422, ""},
		{"ids not a list", "POST", "/v1/skills/candidates", map[string]any{"skill_key": "k", "source_execution_ids": "x"}, 422, ""},
		{"preconditions not an object", "POST", "/v1/skills/candidates", map[string]any{"skill_key": "k", "source_execution_ids": []string{e1}, "preconditions": []int{1}}, 422, ""},
		{"bad stage", "POST", "/v1/skills/candidates/" + ca["id"].(string) + "/promote", map[string]any{"stage": "invalid-stage"}, 400, "validation_error"},
		{"unevaluated promote", "POST", "/v1/skills/candidates/" + ca["id"].(string) + "/promote", map[string]any{"stage": "canary"}, 409, "conflict"},
		{"rejected promote", "POST", "/v1/skills/candidates/" + cb["id"].(string) + "/promote", map[string]any{}, 409, "conflict"},
		{"evaluate without passed", "POST", "/v1/skills/candidates/" + ca["id"].(string) + "/evaluate", map[string]any{"score": 1}, 422, ""},
		{"score not a number", "POST", "/v1/skills/candidates/" + ca["id"].(string) + "/evaluate", map[string]any{"passed": true, "score": "x"}, 422, ""},
		{"unknown candidate", "GET", "/v1/skills/candidates/sc-000000000000", nil, 404, "not_found"},
		{"payload not a blob ref", "GET", "/v1/skills/payloads/" + url.PathEscape("s3://candidate/payload-1"), nil, 400, "validation_error"},
		{"missing payload", "GET", "/v1/skills/payloads/blob:missing-payload", nil, 404, "not_found"},
		{"payload a string", "POST", "/v1/skills/payloads", map[string]any{"payload": "x"}, 422, ""},
		{"payload kind empty", "POST", "/v1/skills/payloads", map[string]any{"payload": map[string]any{}, "kind": ""}, 422, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out, _ := a.call(t, tc.method, tc.path, keyAlice, tc.body)
			if st != tc.status || errCode(out) != tc.code {
				t.Errorf("got %d %v, want %d %s", st, out, tc.status, tc.code)
			}
		})
	}
}

// TestSkillPayloadsAndDeletes: a payload round trip, and the soft deletes' rules (an active release's candidate is
// a conflict until the release is deleted; deleted records are gone from reads and lists).
func TestSkillPayloadsAndDeletes(t *testing.T) {
	a := newTestAPI(t)
	p := a.skillCall(t, 201, "POST", "/v1/skills/payloads", keyAlice,
		map[string]any{"kind": "candidate_payload", "payload": map[string]any{"commands": []string{"open about:blank", "snapshot -i"}}})
	ref, _ := p["payload_ref"].(string)
	if len(ref) < 6 || ref[:5] != "blob:" || p["kind"] != "candidate_payload" {
		t.Fatalf("payload: %v", p)
	}
	got := a.skillCall(t, 200, "GET", "/v1/skills/payloads/"+ref, keyAlice, nil)
	cmds, _ := got["payload"].(map[string]any)["commands"].([]any)
	if got["payload_ref"] != ref || got["kind"] != "candidate_payload" || len(cmds) != 2 || cmds[1] != "snapshot -i" {
		t.Fatalf("payload read: %v", got)
	}
	if out := a.skillCall(t, 201, "POST", "/v1/skills/payloads", keyAlice, map[string]any{"payload": []any{1, 2}}); out["kind"] != "generic" {
		t.Errorf("default kind: %v", out)
	}

	id := a.create(t, keyAlice, map[string]any{"ttl": 600})
	c := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{"skill_key": "del", "source_execution_ids": []string{a.shellExec(t, keyAlice, id, "true", "")}, "payload_ref": ref})
	cid := c["id"].(string)
	a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+cid+"/evaluate", keyAlice, map[string]any{"passed": true})
	r := a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+cid+"/promote", keyAlice, map[string]any{"stage": "stable"})
	rid := r["id"].(string)
	if got := a.skillCall(t, 200, "GET", "/v1/skills/candidates/"+cid, keyAlice, nil); got["promotion_release_id"] != rid || got["status"] != "promoted" {
		t.Fatalf("promoted candidate: %v", got)
	}
	if out := a.skillCall(t, 409, "DELETE", "/v1/skills/candidates/"+cid, keyAlice, nil); errCode(out) != "conflict" {
		t.Errorf("delete candidate of an active release: %v", out)
	}
	d := a.skillCall(t, 200, "DELETE", "/v1/skills/releases/"+rid, keyAlice, map[string]any{"reason": "obsolete"})
	if d["id"] != rid || d["delete_reason"] != "obsolete" || d["deleted_at"] == nil {
		t.Errorf("release delete: %v", d)
	}
	if got := a.skillCall(t, 200, "GET", "/v1/skills/candidates/"+cid, keyAlice, nil); got["promotion_release_id"] != nil {
		t.Errorf("promotion pointer after the release's delete: %v", got)
	}
	if out := a.skillCall(t, 200, "GET", "/v1/skills/releases", keyAlice, nil); out["total"] != float64(0) {
		t.Errorf("deleted release listed: %v", out)
	}
	a.skillCall(t, 404, "DELETE", "/v1/skills/releases/"+rid, keyAlice, nil)
	a.skillCall(t, 200, "DELETE", "/v1/skills/candidates/"+cid, keyAlice, nil)
	a.skillCall(t, 404, "GET", "/v1/skills/candidates/"+cid, keyAlice, nil)
}

// TestSkillReleaseHealth: executions tagged release:<id> are the release's samples; against a clean previous version
// a failing canary should be rolled back.
func TestSkillReleaseHealth(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"ttl": 3600})
	release := func(key string) string {
		c := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{"skill_key": key, "source_execution_ids": []string{a.shellExec(t, keyAlice, id, "true", "")}})
		a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+c["id"].(string)+"/evaluate", keyAlice, map[string]any{"passed": true})
		return a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+c["id"].(string)+"/promote", keyAlice, nil)["id"].(string)
	}
	v1 := release("h")
	a.clock.Advance(time.Second)
	for range 4 {
		a.shellExec(t, keyAlice, id, "true", "release:"+v1)
	}
	a.clock.Advance(time.Second)
	h1 := a.skillCall(t, 200, "GET", "/v1/skills/releases/"+v1+"/health", keyAlice, nil)
	if h1["samples"] != float64(4) || h1["success_rate"] != float64(1) || h1["healthy"] != true || h1["should_rollback"] != false ||
		h1["baseline_samples"] != float64(0) || h1["window_complete"] != false {
		t.Fatalf("v1 health: %v", h1)
	}
	a.clock.Advance(time.Second)
	v2 := release("h")
	a.clock.Advance(time.Second)
	a.shellExec(t, keyAlice, id, "true", "release:"+v2)
	a.shellExec(t, keyAlice, id, "false", "x,release:"+v2)
	h2 := a.skillCall(t, 200, "GET", "/v1/skills/releases/"+v2+"/health", keyAlice, nil)
	reasons, _ := h2["rollback_reasons"].([]any)
	if h2["samples"] != float64(2) || h2["success_rate"] != 0.5 || h2["baseline_samples"] != float64(4) ||
		h2["should_rollback"] != true || h2["healthy"] != false || len(reasons) != 2 || h2["error_rate_multiplier"] != 1e6 {
		t.Fatalf("v2 health: %v", h2)
	}
	a.clock.Advance(25 * time.Hour)
	if h := a.skillCall(t, 200, "GET", "/v1/skills/releases/"+v2+"/health", keyAlice, nil); h["window_complete"] != true {
		t.Errorf("window after 25 h: %v", h)
	}
}

// TestSkillOwnerIsolation performs bob's attacks on alice's skills: reading, evaluating, promoting, rolling back and
// deleting her records, reading her payload, and citing her execution as his evidence. Each answers as if the record
// did not exist, and none changes hers.
func TestSkillOwnerIsolation(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"ttl": 600})
	eid := a.shellExec(t, keyAlice, id, "true", "")
	c := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{"skill_key": "secret", "source_execution_ids": []string{eid}})
	cid := c["id"].(string)
	a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+cid+"/evaluate", keyAlice, map[string]any{"passed": true})
	rid := a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+cid+"/promote", keyAlice, nil)["id"].(string)
	ref := a.skillCall(t, 201, "POST", "/v1/skills/payloads", keyAlice, map[string]any{"payload": map[string]any{"k": "alice"}})["payload_ref"].(string)

	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"read her candidate", "GET", "/v1/skills/candidates/" + cid, nil, 404, "not_found"},
		{"evaluate her candidate", "POST", "/v1/skills/candidates/" + cid + "/evaluate", map[string]any{"passed": false}, 404, "not_found"},
		{"promote her candidate", "POST", "/v1/skills/candidates/" + cid + "/promote", map[string]any{"stage": "stable"}, 404, "not_found"},
		{"delete her candidate", "DELETE", "/v1/skills/candidates/" + cid, nil, 404, "not_found"},
		{"roll back her release", "POST", "/v1/skills/releases/" + rid + "/rollback", nil, 404, "not_found"},
		{"read her release's health", "GET", "/v1/skills/releases/" + rid + "/health", nil, 404, "not_found"},
		{"delete her release", "DELETE", "/v1/skills/releases/" + rid, nil, 404, "not_found"},
		{"read her payload", "GET", "/v1/skills/payloads/" + ref, nil, 404, "not_found"},
		{"cite her execution", "POST", "/v1/skills/candidates", map[string]any{"skill_key": "stolen", "source_execution_ids": []string{eid}}, 400, "validation_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out, _ := a.call(t, tc.method, tc.path, keyBob, tc.body)
			if st != tc.status || errCode(out) != tc.code {
				t.Errorf("got %d %v, want %d %s", st, out, tc.status, tc.code)
			}
		})
	}
	for _, path := range []string{"/v1/skills/candidates", "/v1/skills/releases"} {
		if out := a.skillCall(t, 200, "GET", path, keyBob, nil); out["total"] != float64(0) {
			t.Errorf("bob's %s: %v", path, out)
		}
	}
	got := a.skillCall(t, 200, "GET", "/v1/skills/candidates/"+cid, keyAlice, nil)
	rels := a.skillCall(t, 200, "GET", "/v1/skills/releases?active_only=true", keyAlice, nil)
	if got["status"] != "promoted" || got["is_deleted"] != false || rels["total"] != float64(1) {
		t.Errorf("alice's records after the attacks: %v %v", got, rels)
	}
}

// TestBrowserSkillRun replays a released browser skill: Bay's answers for no active release (404), a payload_ref that
// is not a blob (400 "Unsupported payload_ref"), then the payload's commands run as a batch recorded with the skill,
// release and stage tags, which the release's health counts.
func TestBrowserSkillRun(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"profile": "browser-python"})
	S := "/v1/sandboxes/" + id
	st, out, _ := a.call(t, "POST", S+"/browser/skills/missing-skill/run", keyAlice, map[string]any{"timeout": 60, "stop_on_error": true, "include_trace": false})
	if st != 404 || !strings.Contains(out["error"].(map[string]any)["message"].(string), "No active release found") {
		t.Fatalf("missing skill: %d %v", st, out)
	}
	_, src, _ := a.call(t, "POST", S+"/browser/exec", keyAlice, map[string]any{"cmd": "open about:blank"})
	release := func(key, ref string) string {
		c := a.skillCall(t, 201, "POST", "/v1/skills/candidates", keyAlice, map[string]any{"skill_key": key, "source_execution_ids": []string{src["execution_id"].(string)}, "payload_ref": ref})
		a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+c["id"].(string)+"/evaluate", keyAlice, map[string]any{"passed": true, "score": 0.9})
		return a.skillCall(t, 200, "POST", "/v1/skills/candidates/"+c["id"].(string)+"/promote", keyAlice, map[string]any{"stage": "canary"})["id"].(string)
	}
	release("bad-ref", "s3://invalid-payload")
	st, out, _ = a.call(t, "POST", S+"/browser/skills/bad-ref/run", keyAlice, map[string]any{})
	if st != 400 || !strings.Contains(out["error"].(map[string]any)["message"].(string), "Unsupported payload_ref") {
		t.Fatalf("bad ref: %d %v", st, out)
	}
	for _, tc := range []struct{ payload any }{{map[string]any{"steps": []string{"x"}}}, {map[string]any{"commands": []string{" "}}}, {[]any{"open x"}}} {
		ref := a.skillCall(t, 201, "POST", "/v1/skills/payloads", keyAlice, map[string]any{"payload": tc.payload})["payload_ref"].(string)
		release("bad-payload", ref)
		if st, out, _ := a.call(t, "POST", S+"/browser/skills/bad-payload/run", keyAlice, nil); st != 400 || errCode(out) != "validation_error" {
			t.Errorf("payload %v: %d %v", tc.payload, st, out)
		}
	}
	ref := a.skillCall(t, 201, "POST", "/v1/skills/payloads", keyAlice, map[string]any{"kind": "candidate_payload", "payload": map[string]any{"commands": []string{"open example.com", "get title"}}})["payload_ref"].(string)
	rid := release("title", ref)
	run := a.skillCall(t, 200, "POST", S+"/browser/skills/title/run", keyAlice, map[string]any{"tags": "mine"})
	res, _ := run["results"].([]any)
	if run["skill_key"] != "title" || run["release_id"] != rid || run["total_steps"] != float64(2) || run["success"] != true || len(res) != 2 ||
		res[1].(map[string]any)["stdout"] != "Example Domain\n" || run["trace_ref"] != nil {
		t.Fatalf("run: %v", run)
	}
	e := a.skillCall(t, 200, "GET", S+"/history/"+run["execution_id"].(string), keyAlice, nil)
	if e["exec_type"] != "browser_batch" || e["tags"] != "mine,release:"+rid+",skill:title,stage:canary" || e["code"] != "open example.com\nget title" {
		t.Errorf("history entry: %v", e)
	}
	if h := a.skillCall(t, 200, "GET", "/v1/skills/releases/"+rid+"/health", keyAlice, nil); h["samples"] != float64(1) || h["success_rate"] != float64(1) {
		t.Errorf("health after the replay: %v", h)
	}
	// include_trace keeps the replay's trace: its ref is answered, on the entry, and reads back as a payload too
	// (kind browser_trace), to alice only.
	traced := a.skillCall(t, 200, "POST", S+"/browser/skills/title/run", keyAlice, map[string]any{"include_trace": true})
	tref, _ := traced["trace_ref"].(string)
	if !strings.HasPrefix(tref, "blob:") {
		t.Fatalf("run with include_trace: %v", traced)
	}
	if e := a.skillCall(t, 200, "GET", S+"/history/"+traced["execution_id"].(string), keyAlice, nil); e["payload_ref"] != tref {
		t.Errorf("the traced replay's entry: %v", e)
	}
	tr := a.skillCall(t, 200, "GET", S+"/browser/traces/"+tref, keyAlice, nil)["trace"].(map[string]any)
	if tr["kind"] != "browser_batch_trace" || len(tr["steps"].([]any)) != 2 {
		t.Errorf("the replay's trace: %v", tr)
	}
	if p := a.skillCall(t, 200, "GET", "/v1/skills/payloads/"+tref, keyAlice, nil); p["kind"] != "browser_trace" || p["payload_ref"] != tref ||
		p["payload"].(map[string]any)["kind"] != "browser_batch_trace" {
		t.Errorf("the trace as a payload: %v", p)
	}
	if st, out, _ := a.call(t, "GET", "/v1/skills/payloads/"+tref, keyBob, nil); st != 404 || errCode(out) != "not_found" {
		t.Errorf("bob reads alice's trace as a payload: %d %v", st, out)
	}
	// Bob cannot replay alice's skill in his own sandbox.
	bobs := a.create(t, keyBob, map[string]any{"profile": "browser-python"})
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+bobs+"/browser/skills/title/run", keyBob, nil); st != 404 || errCode(out) != "not_found" {
		t.Errorf("bob replays alice's skill: %d %v", st, out)
	}
}
