package bayapi_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
)

// TestSkillsAgainstGateway drives the skills lifecycle on a real gateway with executions run in a real container,
// with the requests Shipyard Neo's SDK (shipyard_neo/skills.py) sends: python/exec with tags, payloads, a candidate
// from the execution, evaluate, promote (stable, then a canary upgrade), list with active_only=true, health from
// executions tagged release:<id>, rollback, delete with a JSON reason body. Bob's key then tries alice's records.
func TestSkillsAgainstGateway(t *testing.T) {
	g := startGateway(t, "", nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(g.url, readCredentials(t, g.dataDir).APIKey)
	bob := client.New(g.url, "sk-bob")
	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	run := func(code, tags string) string {
		t.Helper()
		var out struct {
			Success     bool   `json:"success"`
			ExecutionID string `json:"execution_id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/python/exec", map[string]any{"code": code, "tags": tags}, &out); err != nil || !strings.HasPrefix(out.ExecutionID, "exec-") {
			t.Fatalf("python/exec %q: %+v %v", code, out, err)
		}
		return out.ExecutionID
	}
	do := func(cl *client.Client, method, path string, body any) map[string]any {
		t.Helper()
		var out map[string]any
		if err := cl.Do(ctx, method, path, body, &out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return out
	}
	execA := run("print('candidate-a')", "skills,evidence")

	p := do(c, "POST", "/v1/skills/payloads", map[string]any{"kind": "candidate_payload", "payload": map[string]any{"code": "print('a')"}})
	ref, _ := p["payload_ref"].(string)
	if got := do(c, "GET", "/v1/skills/payloads/"+ref, nil); got["kind"] != "candidate_payload" || got["payload"].(map[string]any)["code"] != "print('a')" {
		t.Fatalf("payload: %v", got)
	}
	release := func(exec, stage, upgrade string) (map[string]any, map[string]any) {
		t.Helper()
		cand := do(c, "POST", "/v1/skills/candidates", map[string]any{"skill_key": "csv-loader", "source_execution_ids": []string{exec},
			"payload_ref": ref, "summary": "Load CSV", "preconditions": map[string]any{"runtime": "python"}})
		if cand["status"] != "draft" {
			t.Fatalf("candidate: %v", cand)
		}
		if ev := do(c, "POST", "/v1/skills/candidates/"+cand["id"].(string)+"/evaluate", map[string]any{"passed": true, "score": 0.93}); ev["passed"] != true {
			t.Fatalf("evaluation: %v", ev)
		}
		body := map[string]any{"stage": stage}
		if upgrade != "" {
			body["upgrade_of_release_id"] = upgrade
		}
		return cand, do(c, "POST", "/v1/skills/candidates/"+cand["id"].(string)+"/promote", body)
	}
	_, v1 := release(execA, "stable", "")
	execV1 := run("print('with v1')", "release:"+v1["id"].(string))
	candB, v2 := release(run("print('candidate-b')", ""), "canary", v1["id"].(string))
	if v1["version"] != float64(1) || v2["version"] != float64(2) || v2["upgrade_of_release_id"] != v1["id"] {
		t.Fatalf("releases: %v %v", v1, v2)
	}
	run("print('with v2')", "release:"+v2["id"].(string))
	run("raise ValueError('v2 broke')", "release:"+v2["id"].(string))
	h := do(c, "GET", "/v1/skills/releases/"+v2["id"].(string)+"/health", nil)
	if h["samples"] != float64(2) || h["success_rate"] != 0.5 || h["baseline_samples"] != float64(1) || h["should_rollback"] != true {
		t.Fatalf("v2 health: %v", h)
	}
	if active := do(c, "GET", "/v1/skills/releases?"+url.Values{"skill_key": {"csv-loader"}, "active_only": {"true"}, "limit": {"100"}, "offset": {"0"}}.Encode(), nil); active["total"] != float64(1) {
		t.Fatalf("active: %v", active)
	}

	// Bob's key: alice's records do not exist for him, and her execution is not his evidence.
	for _, tc := range []struct {
		method, path string
		body         any
		code         string
	}{
		{"POST", "/v1/skills/releases/" + v2["id"].(string) + "/rollback", nil, "not_found"},
		{"GET", "/v1/skills/candidates/" + candB["id"].(string), nil, "not_found"},
		{"POST", "/v1/skills/candidates/" + candB["id"].(string) + "/promote", map[string]any{"stage": "stable"}, "not_found"},
		{"GET", "/v1/skills/payloads/" + ref, nil, "not_found"},
		{"POST", "/v1/skills/candidates", map[string]any{"skill_key": "stolen", "source_execution_ids": []string{execV1}}, "validation_error"},
	} {
		if err := bob.Do(ctx, tc.method, tc.path, tc.body, nil); code(err) != tc.code {
			t.Errorf("bob %s %s: %v, want %s", tc.method, tc.path, err, tc.code)
		}
	}

	v3 := do(c, "POST", "/v1/skills/releases/"+v2["id"].(string)+"/rollback", nil)
	if v3["rollback_of"] != v2["id"] || v3["version"] != float64(3) || v3["candidate_id"] != v1["candidate_id"] {
		t.Fatalf("rollback: %v", v3)
	}
	if got := do(c, "GET", "/v1/skills/candidates/"+candB["id"].(string), nil); got["status"] != "rolled_back" {
		t.Errorf("candidate b: %v", got)
	}
	if d := do(c, "DELETE", "/v1/skills/releases/"+v2["id"].(string), map[string]any{"reason": "regressed"}); d["delete_reason"] != "regressed" {
		t.Errorf("delete: %v", d)
	}
	if err := c.Do(ctx, "DELETE", "/v1/skills/candidates/"+candB["id"].(string), map[string]any{}, nil); err != nil {
		t.Errorf("delete candidate b: %v", err)
	}
}

// TestSkillInjectionAgainstGateway: a profile with `skills` gets the owner's released skill as skills/<key>/SKILL.md
// (frontmatter name and description) on the first exec, owned by the sandbox user; the file stays across stop and
// resume; an agent's own skill in the same directory is left alone; the next release rewrites the file.
func TestSkillInjectionAgainstGateway(t *testing.T) {
	g := startGateway(t, "", nil, true, func(s string) string {
		return strings.Replace(s, "capabilities filesystem shell python", "capabilities filesystem shell python\n\t\t\tskills", 1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(g.url, readCredentials(t, g.dataDir).APIKey)
	do := func(method, path string, body any) map[string]any {
		t.Helper()
		var out map[string]any
		if err := c.Do(ctx, method, path, body, &out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return out
	}
	shell := func(id, cmd string) string {
		t.Helper()
		r, err := c.Shell(ctx, id, cmd, 30)
		if err != nil || !r.Success {
			t.Fatalf("%s: %+v %v", cmd, r, err)
		}
		return strings.TrimSpace(r.Output)
	}
	release := func(sandbox, summary string) {
		t.Helper()
		var ex struct {
			ExecutionID string `json:"execution_id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sandboxes/"+sandbox+"/shell/exec", map[string]any{"command": "echo ok"}, &ex); err != nil {
			t.Fatal(err)
		}
		cand := do("POST", "/v1/skills/candidates", map[string]any{"skill_key": "csv-loader", "source_execution_ids": []string{ex.ExecutionID}, "summary": summary})
		do("POST", "/v1/skills/candidates/"+cand["id"].(string)+"/evaluate", map[string]any{"passed": true})
		do("POST", "/v1/skills/candidates/"+cand["id"].(string)+"/promote", map[string]any{"stage": "stable"})
	}
	first, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), first.ID) })
	release(first.ID, "Load a CSV file")

	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	// The first exec finds the skill already there, written by the sandbox user.
	if got := shell(sb.ID, "stat -c %U skills/csv-loader/SKILL.md; id -un"); len(strings.Fields(got)) != 2 || strings.Fields(got)[0] != strings.Fields(got)[1] {
		t.Errorf("owner of SKILL.md, and the sandbox user: %q", got)
	}
	md, err := c.ReadFile(ctx, sb.ID, "skills/csv-loader/SKILL.md")
	if err != nil || !strings.HasPrefix(md, "---\nname: \"csv-loader\"\ndescription: \"Load a CSV file\"\n") {
		t.Fatalf("SKILL.md: %q %v", md, err)
	}
	if err := c.WriteFile(ctx, sb.ID, "skills/my-own/SKILL.md", "---\nname: my-own\ndescription: mine\n---\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := shell(sb.ID, "ls skills"); got != "csv-loader\nmy-own\npython-sandbox" {
		t.Errorf("skills after stop and resume: %q", got)
	}
	release(sb.ID, "Load a CSV file, v2")
	if got := shell(sb.ID, "grep -c 'v2' skills/csv-loader/SKILL.md; cat skills/my-own/SKILL.md | grep -c mine"); got != "2\n1" {
		t.Errorf("after the second release: %q", got)
	}
}

// TestSkillsWithShipyardSDK drives the lifecycle through Shipyard Neo's own Python SDK (testdata/
// shipyard_sdk_skills.py): create, python exec with tags, payloads, candidates, evaluate, promote, health, the
// injected SKILL.md, list, rollback, deletes. The SDK is not on a package registry this project's machines reach, so
// the test runs where SANDGATE_SHIPYARD_SDK names a PYTHONPATH holding shipyard_neo and httpx (a checkout of
// shipyard-neo-sdk and the system's python3-httpx), and says so otherwise.
func TestSkillsWithShipyardSDK(t *testing.T) {
	sdk := os.Getenv("SANDGATE_SHIPYARD_SDK")
	if sdk == "" {
		t.Skip("SANDGATE_SHIPYARD_SDK is not set: the PYTHONPATH of Shipyard Neo's SDK (shipyard_neo) and httpx")
	}
	g := startGateway(t, "api_key sk-sdk", nil, true, func(s string) string {
		return strings.Replace(s, "capabilities filesystem shell python", "capabilities filesystem shell python\n\t\t\tskills", 1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", filepath.Join("testdata", "shipyard_sdk_skills.py"))
	cmd.Env = append(os.Environ(), "BAY_URL="+g.url, "BAY_KEY=sk-sdk", "PYTHONPATH="+sdk)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SDK_SKILLS_OK") {
		t.Fatalf("the SDK's sequence: %v\n%s", err, out)
	}
}
