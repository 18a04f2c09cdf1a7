package service

import (
	"context"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// workspaceAgent keeps a sandbox's workspace in memory and records the agent calls that change it.
type workspaceAgent struct {
	Agent
	mu    sync.Mutex
	files map[string]string
	calls []string
}

func (a *workspaceAgent) Exec(context.Context, sandboxes.Target, ExecRequest) (ExecResult, error) {
	return ExecResult{}, nil
}

func (a *workspaceAgent) WriteFile(_ context.Context, t sandboxes.Target, p string, r io.Reader) error {
	b, _ := io.ReadAll(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[t.SandboxID+"/"+p] = string(b)
	a.calls = append(a.calls, "write "+p)
	return nil
}

func (a *workspaceAgent) Remove(_ context.Context, t sandboxes.Target, p string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.files {
		if strings.HasPrefix(k, t.SandboxID+"/"+p+"/") {
			delete(a.files, k)
		}
	}
	a.calls = append(a.calls, "remove "+p)
	return nil
}

// realSandboxes starts the real Manager over sandboxestest's engine serving profiles and creates one sandbox of
// each owner and profile given; it answers the Manager and the id it gave each, by the name given as ID.
func realSandboxes(t testing.TB, profiles []sandboxes.Profile, boxes ...sandboxes.Sandbox) (*sandboxes.Manager, map[string]string) {
	t.Helper()
	m, _ := sandboxestest.NewManager(t, sandboxes.Config{Profiles: profiles})
	ids := map[string]string{}
	for _, b := range boxes {
		sb, err := m.Create(context.Background(), sandboxes.CreateRequest{Owner: b.Owner, Profile: b.Profile})
		if err != nil {
			t.Fatal(err)
		}
		ids[b.ID] = sb.ID
	}
	return m, ids
}

func (a *workspaceAgent) takeCalls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.calls
	a.calls = nil
	return c
}

// TestSkillInjection: a profile with skills gets the owner's active releases as <dir>/<skill>/SKILL.md on the first
// exec, nothing more while they stay the same, the new version after a promotion, and the directory of a skill
// whose release was deleted removed; a profile without the option and another owner's sandbox get nothing of them.
func TestSkillInjection(t *testing.T) {
	ctx := context.Background()
	st := sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "s.db"))
	t.Cleanup(func() { st.Close() })
	shell := []string{sandboxes.CapShell}
	core, ids := realSandboxes(t, []sandboxes.Profile{{ID: "ship", Image: "img", Skills: "skills", Capabilities: shell},
		{ID: "plain", Image: "img", Capabilities: shell}},
		sandboxes.Sandbox{ID: "sb-a", Owner: "alice", Profile: "ship"},
		sandboxes.Sandbox{ID: "sb-plain", Owner: "alice", Profile: "plain"},
		sandboxes.Sandbox{ID: "sb-b", Owner: "bob", Profile: "ship"})
	agent := &workspaceAgent{files: map[string]string{}}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	svc := New(Config{Sandboxes: core, Agent: agent, History: st, Skills: st, Now: func() time.Time { now = now.Add(time.Second); return now }})
	exec := func(name string) []string {
		t.Helper()
		sb, err := core.Get(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.RunShell(ctx, Principal{Owner: sb.Owner}, sb.ID, ShellParams{Command: "true", Timeout: time.Second}, ExecMeta{}); err != nil {
			t.Fatal(err)
		}
		return agent.takeCalls()
	}
	if got := exec("sb-a"); got != nil { // no releases yet: nothing written
		t.Fatalf("writes without releases: %q", got)
	}
	hist, _, _ := svc.History(ctx, alice, ids["sb-a"], nil, 0, 1)
	summary, notes := "Load a CSV", "call load(path)"
	promote := func(key string) *SkillRelease {
		t.Helper()
		c, err := svc.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: key, SourceExecutionIDs: []string{hist[0].ID},
			Summary: &summary, UsageNotes: &notes, Preconditions: map[string]any{"runtime": "python"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.EvaluateSkillCandidate(ctx, alice, c.ID, NewSkillEvaluation{Passed: true}); err != nil {
			t.Fatal(err)
		}
		r, err := svc.PromoteSkillCandidate(ctx, alice, c.ID, SkillPromotion{Stage: StageStable})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	promote("csv-loader")
	odd := promote("../../etc/x\nname: evil")

	oddDir := SkillDirName(odd.SkillKey)
	steps := []struct {
		name    string
		do      func()
		sandbox string
		want    []string
	}{
		{"first exec writes every release", nil, "sb-a", []string{"write skills/csv-loader/SKILL.md", "write skills/" + oddDir + "/SKILL.md"}},
		{"the same releases write nothing", nil, "sb-a", nil},
		{"a profile without skills", nil, "sb-plain", nil},
		{"another owner's sandbox", nil, "sb-b", nil},
		{"a new version is written", func() { promote("csv-loader") }, "sb-a", []string{"write skills/csv-loader/SKILL.md", "write skills/" + oddDir + "/SKILL.md"}},
		{"a deleted release's skill is removed", func() {
			if _, err := svc.DeleteSkillRelease(ctx, alice, odd.ID, nil); err != nil {
				t.Fatal(err)
			}
		}, "sb-a", []string{"write skills/csv-loader/SKILL.md", "remove skills/" + oddDir}},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if got := exec(s.sandbox); !slices.Equal(got, s.want) {
			t.Errorf("%s: %q, want %q", s.name, got, s.want)
		}
	}
	md := agent.files[ids["sb-a"]+"/skills/csv-loader/SKILL.md"]
	front := regexp.MustCompile(`(?s)^---\nname: "csv-loader"\ndescription: "Load a CSV"\nversion: 2\nstage: "stable"\nrelease_id: "sr-[0-9a-f]{12}"\n---\n`)
	if !front.MatchString(md) || !strings.Contains(md, "## Usage\n\ncall load(path)") || !strings.Contains(md, `"runtime": "python"`) ||
		!strings.Contains(md, hist[0].ID) {
		t.Errorf("SKILL.md:\n%s", md)
	}
}

func TestSkillDirName(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"csv-loader", "csv-loader"},
		{"Web_Login.v2", "Web_Login.v2"},
		{"..", "skill-"},
		{".hidden", "hidden-"},
		{"a/b", "a-b-"},
		{"../../etc", "etc-"},
		{"名前", "skill-"},
		{strings.Repeat("a", 80), strings.Repeat("a", 64) + "-"},
	} {
		got := SkillDirName(tc.key)
		if got != tc.want && !(strings.HasSuffix(tc.want, "-") && strings.HasPrefix(got, tc.want) && len(got) == len(tc.want)+12) {
			t.Errorf("%q: %q, want %q", tc.key, got, tc.want)
		}
	}
	if SkillDirName("a/b") == SkillDirName("a b") {
		t.Error("two keys share a directory")
	}
}

// FuzzSkillDirName: any skill key (tenant input) names one flat, safe directory under the skills directory.
func FuzzSkillDirName(f *testing.F) {
	for _, s := range []string{"csv", "..", "../x", "a/b", ".x", "-x", "\x00", "a\nb", strings.Repeat("z", 100)} {
		f.Add(s)
	}
	safe := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	f.Fuzz(func(t *testing.T, key string) {
		d := SkillDirName(key)
		if !safe.MatchString(d) || len(d) > 64+13 {
			t.Fatalf("%q: %q", key, d)
		}
		if p, err := CleanWorkspacePath("skills", "skills/"+d+"/SKILL.md", false); err != nil || p != "skills/"+d+"/SKILL.md" {
			t.Fatalf("%q: %q %v", key, p, err)
		}
	})
}

// TestBuiltinSkills: a profile with skills gets the built-in skill of each capability it grants (python-sandbox,
// browser-automation), with frontmatter naming it; a released skill of the same name replaces the built-in one.
func TestBuiltinSkills(t *testing.T) {
	ctx := context.Background()
	st := sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "s.db"))
	t.Cleanup(func() { st.Close() })
	core, ids := realSandboxes(t, []sandboxes.Profile{
		{ID: "ship-py", Image: "img", Skills: "skills", Capabilities: []string{sandboxes.CapShell, sandboxes.CapPython}},
		{ID: "ship-web", Image: "img", Skills: "skills", Capabilities: []string{sandboxes.CapShell, sandboxes.CapPython, sandboxes.CapBrowser}}},
		sandboxes.Sandbox{ID: "sb-py", Owner: "alice", Profile: "ship-py"},
		sandboxes.Sandbox{ID: "sb-web", Owner: "alice", Profile: "ship-web"})
	agent := &workspaceAgent{files: map[string]string{}}
	svc := New(Config{Sandboxes: core, Agent: agent, History: st, Skills: st})
	exec := func(name string) []string {
		t.Helper()
		if _, err := svc.RunShell(ctx, alice, ids[name], ShellParams{Command: "true", Timeout: time.Second}, ExecMeta{}); err != nil {
			t.Fatal(err)
		}
		return agent.takeCalls()
	}
	if got := exec("sb-py"); !slices.Equal(got, []string{"write skills/python-sandbox/SKILL.md"}) {
		t.Errorf("python sandbox: %q", got)
	}
	if got := exec("sb-web"); !slices.Equal(got, []string{"write skills/browser-automation/SKILL.md", "write skills/python-sandbox/SKILL.md"}) {
		t.Errorf("browser sandbox: %q", got)
	}
	for _, name := range []string{"python-sandbox", "browser-automation"} {
		if md := agent.files[ids["sb-web"]+"/skills/"+name+"/SKILL.md"]; !strings.HasPrefix(md, "---\nname: "+name+"\ndescription: \"") {
			t.Errorf("%s:\n%s", name, md)
		}
	}
	hist, _, _ := svc.History(ctx, alice, ids["sb-py"], nil, 0, 1)
	summary := "our own python notes"
	c, err := svc.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: "python-sandbox", SourceExecutionIDs: []string{hist[0].ID}, Summary: &summary})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.EvaluateSkillCandidate(ctx, alice, c.ID, NewSkillEvaluation{Passed: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PromoteSkillCandidate(ctx, alice, c.ID, SkillPromotion{}); err != nil {
		t.Fatal(err)
	}
	exec("sb-py")
	if md := agent.files[ids["sb-py"]+"/skills/python-sandbox/SKILL.md"]; !strings.Contains(md, summary) {
		t.Errorf("released python-sandbox:\n%s", md)
	}
}

// BenchmarkSkillInjectCheck is what a skills profile adds to every exec once its files are written: one store read
// of the owner's revision (20 releases here: 1.6 to 9 µs/op on the shared 2-core VM, against 426 µs when every exec
// rendered and hashed them).
func BenchmarkSkillInjectCheck(b *testing.B) {
	ctx := context.Background()
	st := sandboxes.NewBoltStore(filepath.Join(b.TempDir(), "s.db"))
	defer st.Close()
	core, ids := realSandboxes(b, []sandboxes.Profile{{ID: "ship", Image: "img", Skills: "skills",
		Capabilities: []string{sandboxes.CapShell, sandboxes.CapPython}}},
		sandboxes.Sandbox{ID: "sb", Owner: "alice", Profile: "ship"})
	sb := ids["sb"]
	agent := &workspaceAgent{files: map[string]string{}}
	svc := New(Config{Sandboxes: core, Agent: agent, History: st, Skills: st})
	_, _ = svc.RunShell(ctx, alice, sb, ShellParams{Command: "true", Timeout: time.Second}, ExecMeta{})
	hist, _, _ := svc.History(ctx, alice, sb, nil, 0, 1)
	for i := range 20 {
		c, _ := svc.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: string(rune('a'+i)) + "-skill", SourceExecutionIDs: []string{hist[0].ID}})
		_, _ = svc.EvaluateSkillCandidate(ctx, alice, c.ID, NewSkillEvaluation{Passed: true})
		_, _ = svc.PromoteSkillCandidate(ctx, alice, c.ID, SkillPromotion{})
	}
	svc.injectSkills(ctx, sb, sandboxes.Target{SandboxID: sb})
	b.ResetTimer()
	for b.Loop() {
		svc.injectSkills(ctx, sb, sandboxes.Target{SandboxID: sb})
	}
}
