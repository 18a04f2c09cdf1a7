package service

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// mustCode stops a test whose call did not end as wanted: with an error of code, or without one when code is "".
func mustCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := AsError(err).Code; err != nil && got != code || err == nil && code != "" {
		t.Fatalf("got %v (%s), want %q", err, got, code)
	}
}

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
	edit := func(id, path, old string) func(*Service, *testBed) error {
		return func(s *Service, b *testBed) error {
			_, err := s.EditFile(ctx, alice, b.id(id), agentapi.EditRequest{Path: path, Old: old, New: "x"})
			return err
		}
	}
	search := func(id, path, pattern string) func(*Service, *testBed) error {
		return func(s *Service, b *testBed) error {
			_, err := s.SearchFiles(ctx, alice, b.id(id), agentapi.GrepRequest{Path: path, Pattern: pattern})
			return err
		}
	}
	tests := []struct {
		name     string
		call     func(*Service, *testBed) error
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
			svc, b, agent := newTestService(t)
			tools := &toolAgent{fakeAgent: agent}
			cfg := svc.cfg
			if !tc.noTools {
				cfg.Agent = tools
			}
			err := tc.call(New(cfg), b)
			mustCode(t, err, tc.code)
			var reached []string
			for _, e := range tools.edits {
				reached = append(reached, e.Path)
			}
			for _, g := range tools.greps {
				reached = append(reached, g.Path)
			}
			if tc.code != "" && (len(reached) != 0 || b.running() != 0) {
				t.Errorf("a refused call reached the agent (%v) or started %d sandboxes", reached, b.running())
			}
			if tc.code == "" && (len(reached) != 1 || reached[0] != tc.wantPath) {
				t.Errorf("the agent got paths %v, want %q", reached, tc.wantPath)
			}
		})
	}
}

// withoutPause hides the core's Pause and Resume: a Manager that cannot pause.
type withoutPause struct{ Sandboxes }

// TestPauseResumeChecks: Pause and Resume say first that a gateway cannot pause, then refuse another's or an
// expired sandbox, and only then reach the Manager.
func TestPauseResumeChecks(t *testing.T) {
	ctx := context.Background()
	alice := Principal{Owner: "alice"}
	tests := []struct {
		name    string
		resume  bool
		id      string
		noPause bool
		code    string
		want    sandboxes.Status // the sandbox's status after a call that reached the Manager
	}{
		{"pause without the capability", false, "sb-bob", true, CodeCapability, ""},
		{"resume without the capability", true, "sb-alice", true, CodeCapability, ""},
		{"pause another's sandbox", false, "sb-bob", false, CodeNotFound, ""},
		{"resume another's sandbox", true, "sb-bob", false, CodeNotFound, ""},
		{"pause an expired sandbox", false, "sb-old", false, CodeSandboxExpired, ""},
		{"resume a missing sandbox", true, "sb-none", false, CodeNotFound, ""},
		{"pause", false, "sb-alice", false, "", sandboxes.StatusPaused},
		{"resume", true, "sb-alice", false, "", sandboxes.StatusReady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, b, _ := newTestService(t)
			// alice's and bob's sandboxes run (a resume finds alice's paused): a call that reached the Manager
			// changes a status.
			for _, name := range []string{"sb-alice", "sb-bob"} {
				if _, err := b.m.Hold(ctx, b.id(name)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.resume {
				if _, err := b.m.Pause(ctx, b.id("sb-alice")); err != nil {
					t.Fatal(err)
				}
			}
			before := map[string]sandboxes.Status{}
			for _, name := range []string{"sb-alice", "sb-bob", "sb-old"} {
				before[name] = b.status(t, name)
			}
			cfg := svc.cfg
			if tc.noPause {
				cfg.Sandboxes = withoutPause{b.m}
			}
			svc = New(cfg)
			op := svc.Pause
			if tc.resume {
				op = svc.Resume
			}
			sb, err := op(ctx, alice, b.id(tc.id))
			mustCode(t, err, tc.code)
			for name, st := range before {
				if got := b.status(t, name); tc.code != "" && got != st {
					t.Errorf("a refused call reached the Manager: %s went from %s to %s", name, st, got)
				}
			}
			if tc.code == "" {
				if got := b.status(t, tc.id); got != tc.want || sb.ID != b.id(tc.id) || sb.Status != tc.want {
					t.Errorf("%s reads %s and the call answered %+v, want %s", tc.id, got, sb, tc.want)
				}
			}
		})
	}
}

// browserAgent is fakeAgent with a browser; it notes the actions and the files that reached it.
type browserAgent struct {
	*fakeAgent
	actions []string
	written map[string]string
}

func (a *browserAgent) Browser(ctx context.Context, _ sandboxes.Target, req BrowserRequest) (BrowserResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		return BrowserResult{}, Errorf(CodeValidation, "a browser action without a deadline")
	}
	a.actions = append(a.actions, req.Action)
	return BrowserResult{Value: "v", PNG: []byte("png")}, nil
}

func (a *browserAgent) WriteFile(_ context.Context, t sandboxes.Target, p string, content io.Reader) error {
	b, err := io.ReadAll(content)
	a.written[t.SandboxID+"/"+p] = string(b)
	return err
}

// TestBrowserSession: a browser session is opened once per request with the owner, expiry and capability checks
// of every operation; its actions carry a deadline, and what it saves lands at a checked workspace path even in a
// sandbox whose profile grants the browser without the filesystem.
func TestBrowserSession(t *testing.T) {
	ctx := context.Background()
	alice := Principal{Owner: "alice"}
	svc, b, agent := newTestService(t)
	b.ids["sb-web"] = b.make(t, "alice", "web", 0)
	b.ids["sb-bobweb"] = b.make(t, "bob", "web", 0)
	ba := &browserAgent{fakeAgent: agent, written: map[string]string{}}
	cfg := svc.cfg
	cfg.Agent = ba
	svc = New(cfg)
	for id, code := range map[string]string{"sb-bobweb": CodeNotFound, "sb-alice": CodeCapability, "sb-old": CodeSandboxExpired} {
		if _, err := svc.OpenBrowser(ctx, alice, b.id(id)); AsError(err).Code != code {
			t.Errorf("opening the browser of %s: %v, want %s", id, err, code)
		}
	}
	if _, err := svc.Browse(ctx, alice, b.id("sb-bobweb"), BrowserRequest{Action: "url"}); AsError(err).Code != CodeNotFound || len(ba.actions) != 0 {
		t.Errorf("browsing another's sandbox: %v, actions %v", err, ba.actions)
	}
	if b.running() != 0 {
		t.Fatalf("refused opens started %d sandboxes", b.running())
	}
	// The session holds the sandbox once, when it opens: it starts it, and its idle deadline is the open's. The
	// clock then moves on: a hold by any action or save would move the deadline with it.
	bs, err := svc.OpenBrowser(ctx, alice, b.id("sb-web"))
	if err != nil {
		t.Fatal(err)
	}
	opened, err := b.m.Get(ctx, b.id("sb-web"))
	if err != nil || opened.Status != sandboxes.StatusReady || opened.IdleExpiresAt == nil || b.running() != 1 {
		t.Fatalf("the open did not start the sandbox: %+v %v, %d running", opened, err, b.running())
	}
	b.clock.Advance(time.Minute)
	for _, action := range []string{"navigate", "screenshot"} {
		if res, err := bs.Do(ctx, BrowserRequest{Action: action, Timeout: time.Second}); err != nil || res.Value != "v" {
			t.Fatalf("%s: %+v %v", action, res, err)
		}
	}
	if err := bs.Save(ctx, "shots/./a.png", []byte("png")); err != nil || ba.written[b.id("sb-web")+"/shots/a.png"] != "png" {
		t.Fatalf("save: %v, written %v", err, ba.written)
	}
	if err := bs.Save(ctx, "../../etc/passwd", []byte("x")); AsError(err).Code != CodeInvalidPath || len(ba.written) != 1 {
		t.Errorf("saving outside the workspace: %v, written %v", err, ba.written)
	}
	now, err := b.m.Get(ctx, b.id("sb-web"))
	if err != nil || now.IdleExpiresAt == nil || !now.IdleExpiresAt.Equal(*opened.IdleExpiresAt) || b.running() != 1 || len(ba.actions) != 2 {
		t.Errorf("one session of two actions held the sandbox again (idle deadline %v, opened %v; %d running) or ran %v",
			now.IdleExpiresAt, opened.IdleExpiresAt, b.running(), ba.actions)
	}
}
