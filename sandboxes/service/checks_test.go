package service

import (
	"context"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// toolAgent is fakeAgent with the file tools; it notes what reached it.
type toolAgent struct {
	*fakeAgent
	edits []agentapi.EditRequest
	greps []agentapi.GrepRequest
}

func (a *toolAgent) Edit(_ context.Context, _ sandboxes.Target, req agentapi.EditRequest) (agentapi.EditResult, error) {
	a.edits = append(a.edits, req)
	return agentapi.EditResult{Path: req.Path, Replacements: 1}, nil
}

func (a *toolAgent) Grep(_ context.Context, _ sandboxes.Target, req agentapi.GrepRequest) (agentapi.GrepResult, error) {
	a.greps = append(a.greps, req)
	return agentapi.GrepResult{}, nil
}

// TestFileToolChecks: EditFile and SearchFiles refuse in one order (no file tools, a bad path, their own check,
// then the sandbox), never start a sandbox for a refused request, and hand the agent the cleaned path.
func TestFileToolChecks(t *testing.T) {
	ctx := context.Background()
	alice := Principal{Owner: "alice"}
	edit := func(id, path, old string) func(*Service) error {
		return func(s *Service) error {
			_, err := s.EditFile(ctx, alice, id, agentapi.EditRequest{Path: path, Old: old, New: "x"})
			return err
		}
	}
	search := func(id, path, pattern string) func(*Service) error {
		return func(s *Service) error {
			_, err := s.SearchFiles(ctx, alice, id, agentapi.GrepRequest{Path: path, Pattern: pattern})
			return err
		}
	}
	tests := []struct {
		name     string
		call     func(*Service) error
		noTools  bool
		code     string
		wantPath string // the path that reached the agent, "" for none
	}{
		{"edit without file tools", edit("sb-alice", "a.txt", "x"), true, CodeCapability, ""},
		{"search without file tools", search("sb-alice", "", "x"), true, CodeCapability, ""},
		{"edit outside the workspace", edit("sb-alice", "../etc/passwd", "x"), false, CodeInvalidPath, ""},
		{"edit a bad path with no text: the path first", edit("sb-alice", "/abs", ""), false, CodeInvalidPath, ""},
		{"edit the workspace root", edit("sb-alice", ".", "x"), false, CodeInvalidPath, ""},
		{"search outside the workspace", search("sb-alice", "../..", "x"), false, CodeInvalidPath, ""},
		{"edit with no text to replace", edit("sb-alice", "a.txt", ""), false, CodeValidation, ""},
		{"search with no pattern", search("sb-alice", "", ""), false, CodeValidation, ""},
		{"edit another's file", edit("sb-bob", "secret.txt", "x"), false, CodeNotFound, ""},
		{"search another's workspace", search("sb-bob", "", "x"), false, CodeNotFound, ""},
		{"edit in an expired sandbox", edit("sb-old", "a.txt", "x"), false, CodeSandboxExpired, ""},
		{"search without the filesystem capability", search("sb-nofiles", "", "x"), false, CodeCapability, ""},
		{"edit", edit("sb-alice", "d/./a.txt", "x"), false, "", "d/a.txt"},
		{"search the root", search("sb-alice", "", "x"), false, "", "."},
		{"search a directory", search("sb-alice", "d/../e/", "x"), false, "", "e"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, sbs, agent := newTestService()
			tools := &toolAgent{fakeAgent: agent}
			cfg := svc.cfg
			if !tc.noTools {
				cfg.Agent = tools
			}
			err := tc.call(New(cfg))
			if got := AsError(err).Code; err != nil && got != tc.code || err == nil && tc.code != "" {
				t.Fatalf("got %v (%s), want %s", err, got, tc.code)
			}
			var reached []string
			for _, e := range tools.edits {
				reached = append(reached, e.Path)
			}
			for _, g := range tools.greps {
				reached = append(reached, g.Path)
			}
			if tc.code != "" && (len(reached) != 0 || sbs.holds != 0) {
				t.Errorf("a refused call reached the agent (%v) or started %d sandboxes", reached, sbs.holds)
			}
			if tc.code == "" && (len(reached) != 1 || reached[0] != tc.wantPath) {
				t.Errorf("the agent got paths %v, want %q", reached, tc.wantPath)
			}
		})
	}
}

// pausingSandboxes is fakeSandboxes whose Manager can pause; it notes the calls that reached it.
type pausingSandboxes struct {
	*fakeSandboxes
	calls []string
}

func (f *pausingSandboxes) Pause(_ context.Context, id string) (sandboxes.Sandbox, error) {
	f.calls = append(f.calls, "pause "+id)
	return f.sbs[id], nil
}

func (f *pausingSandboxes) Resume(_ context.Context, id string) (sandboxes.Sandbox, error) {
	f.calls = append(f.calls, "resume "+id)
	return f.sbs[id], nil
}

// TestPauseResumeChecks: Pause and Resume say first that a gateway cannot pause, then refuse another's or an
// expired sandbox, and only then reach the Manager.
func TestPauseResumeChecks(t *testing.T) {
	ctx := context.Background()
	alice := Principal{Owner: "alice"}
	tests := []struct {
		name     string
		resume   bool
		id       string
		noPause  bool
		code     string
		wantCall string
	}{
		{"pause without the capability", false, "sb-bob", true, CodeCapability, ""},
		{"resume without the capability", true, "sb-alice", true, CodeCapability, ""},
		{"pause another's sandbox", false, "sb-bob", false, CodeNotFound, ""},
		{"resume another's sandbox", true, "sb-bob", false, CodeNotFound, ""},
		{"pause an expired sandbox", false, "sb-old", false, CodeSandboxExpired, ""},
		{"resume a missing sandbox", true, "sb-none", false, CodeNotFound, ""},
		{"pause", false, "sb-alice", false, "", "pause sb-alice"},
		{"resume", true, "sb-alice", false, "", "resume sb-alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, sbs, _ := newTestService()
			mgr := &pausingSandboxes{fakeSandboxes: sbs}
			cfg := svc.cfg
			if !tc.noPause {
				cfg.Sandboxes = mgr
			}
			svc = New(cfg)
			op := svc.Pause
			if tc.resume {
				op = svc.Resume
			}
			sb, err := op(ctx, alice, tc.id)
			if got := AsError(err).Code; err != nil && got != tc.code || err == nil && tc.code != "" {
				t.Fatalf("got %v (%s), want %s", err, got, tc.code)
			}
			if tc.code != "" && len(mgr.calls) != 0 {
				t.Errorf("a refused call reached the Manager: %v", mgr.calls)
			}
			if tc.code == "" && (len(mgr.calls) != 1 || mgr.calls[0] != tc.wantCall || sb.ID != tc.id) {
				t.Errorf("the Manager got %v and answered %+v, want %q", mgr.calls, sb, tc.wantCall)
			}
		})
	}
}
