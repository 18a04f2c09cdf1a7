package mcpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
	"github.com/sandgate/sandgate/sandboxes/service"
)

type keyMap map[string]service.Principal

func (k keyMap) Lookup(token string) (service.Principal, bool) { p, ok := k[token]; return p, ok }

type bearerRT struct{ key string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// skillSession connects an MCP client with key to a server over a real Manager (sandboxestest.NewManager) and a
// real store holding one recorded execution of alice's sandbox.
func skillSession(t *testing.T) (connect func(key string) *mcp.ClientSession, sandboxID, execID string) {
	t.Helper()
	st := sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "s.db"))
	t.Cleanup(func() { st.Close() })
	core, _ := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img"}}})
	sb, err := core.Create(context.Background(), sandboxes.CreateRequest{Owner: "alice", Profile: "base"})
	if err != nil {
		t.Fatal(err)
	}
	execID = service.NewID("exec-")
	if err := st.AddHistory(&sandboxes.HistoryEntry{ID: execID, SandboxID: sb.ID, ExecType: "shell", Code: "true",
		Success: true, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	s.SetOps(service.New(service.Config{Sandboxes: core, History: st, Skills: st}),
		keyMap{"ka": {Owner: "alice"}, "kb": {Owner: "bob"}})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return func(key string) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerRT{key}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}, sb.ID, execID
}

// callSkill calls a tool and decodes its structured result (or its error envelope when it failed).
func callSkill(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out, res.IsError
}

func errorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestSkillTools drives the lifecycle through Neo's tool names and arguments, and bob's attacks on alice's skills.
func TestSkillTools(t *testing.T) {
	connect, sbID, execID := skillSession(t)
	alice, bob := connect("ka"), connect("kb")
	must := func(name string, args map[string]any) map[string]any {
		t.Helper()
		out, isErr := callSkill(t, alice, name, args)
		if isErr {
			t.Fatalf("%s %v: %v", name, args, out)
		}
		return out
	}
	// The evidence: the execution history, annotated.
	if h := must("get_execution_history", map[string]any{"sandbox_id": sbID, "exec_type": "shell"}); h["total"] != float64(1) {
		t.Errorf("history: %v", h)
	}
	if e := must("annotate_execution", map[string]any{"sandbox_id": sbID, "execution_id": execID, "tags": "etl", "notes": "worked"}); e["notes"] != "worked" {
		t.Errorf("annotate: %v", e)
	}
	if e := must("get_execution", map[string]any{"sandbox_id": sbID, "execution_id": execID}); e["tags"] != "etl" {
		t.Errorf("get_execution: %v", e)
	}
	if e := must("get_last_execution", map[string]any{"sandbox_id": sbID}); e["id"] != execID {
		t.Errorf("get_last_execution: %v", e)
	}
	if h := must("get_execution_history", map[string]any{"sandbox_id": sbID, "tags": "other"}); h["total"] != float64(0) {
		t.Errorf("history by another tag: %v", h)
	}
	ref := must("create_skill_payload", map[string]any{"payload": map[string]any{"commands": []string{"open x"}}, "kind": "browser"})["payload_ref"].(string)
	if got := must("get_skill_payload", map[string]any{"payload_ref": ref}); got["kind"] != "browser" {
		t.Errorf("payload: %v", got)
	}
	var releases []string
	for range 2 {
		c := must("create_skill_candidate", map[string]any{"skill_key": "k", "source_execution_ids": []string{execID}, "payload_ref": ref})
		must("evaluate_skill_candidate", map[string]any{"candidate_id": c["id"], "passed": true, "score": 0.9})
		r := must("promote_skill_candidate", map[string]any{"candidate_id": c["id"], "stage": "stable"})
		releases = append(releases, r["id"].(string))
	}
	if l := must("list_skill_releases", map[string]any{"active_only": true}); l["total"] != float64(1) {
		t.Errorf("active releases: %v", l)
	}
	if l := must("list_skill_candidates", map[string]any{"status": "promoted", "limit": 1}); l["total"] != float64(2) || len(l["items"].([]any)) != 1 {
		t.Errorf("candidates: %v", l)
	}
	if h := must("get_skill_release_health", map[string]any{"release_id": releases[1]}); h["samples"] != float64(0) || h["healthy"] != false {
		t.Errorf("health: %v", h)
	}

	for _, tc := range []struct {
		name string
		args map[string]any
		code string
	}{
		{"rollback_skill_release", map[string]any{"release_id": releases[1]}, service.CodeNotFound},
		{"delete_skill_release", map[string]any{"release_id": releases[1]}, service.CodeNotFound},
		{"get_skill_payload", map[string]any{"payload_ref": ref}, service.CodeNotFound},
		{"create_skill_candidate", map[string]any{"skill_key": "k", "source_execution_ids": []string{execID}}, service.CodeValidation},
		{"get_skill_release_health", map[string]any{"release_id": releases[0]}, service.CodeNotFound},
		{"get_execution_history", map[string]any{"sandbox_id": sbID}, service.CodeNotFound},
		{"annotate_execution", map[string]any{"sandbox_id": sbID, "execution_id": execID, "notes": "pwned"}, service.CodeNotFound},
	} {
		if out, isErr := callSkill(t, bob, tc.name, tc.args); !isErr || errorCode(out) != tc.code {
			t.Errorf("bob's %s: %v, want %s", tc.name, out, tc.code)
		}
	}
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"evaluate_skill_candidate", map[string]any{"candidate_id": "sc-1"}},
		{"create_skill_payload", map[string]any{"payload": "not an object"}},
		{"promote_skill_candidate", map[string]any{}},
		{"list_skill_candidates", map[string]any{"status": "nope"}},
		{"list_skill_releases", map[string]any{"limit": 501}},
		{"get_execution_history", map[string]any{"sandbox_id": sbID, "exec_type": "perl"}},
		{"get_execution", map[string]any{"sandbox_id": sbID}},
	} {
		// A missing required argument is the schema's refusal (no envelope); the rest are ours.
		if out, isErr := callSkill(t, alice, tc.name, tc.args); !isErr || (out != nil && errorCode(out) != service.CodeValidation) {
			t.Errorf("%s %v: %v, want validation_error", tc.name, tc.args, out)
		}
	}

	rb := must("rollback_skill_release", map[string]any{"release_id": releases[1]})
	if rb["rollback_of"] != releases[1] || rb["version"] != float64(3) {
		t.Errorf("rollback: %v", rb)
	}
	if d := must("delete_skill_release", map[string]any{"release_id": releases[0], "reason": "old"}); d["delete_reason"] != "old" {
		t.Errorf("delete: %v", d)
	}
}
