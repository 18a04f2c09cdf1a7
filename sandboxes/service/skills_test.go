package service

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// skillFixture is the service over a real Manager and store, alice's and bob's sandboxes, and one recorded execution of each.
type skillFixture struct {
	svc            *Service
	st             *sandboxes.BoltStore
	now            time.Time
	aliceExec, bob string
	// aliceSB and bobSB are alice's and bob's sandboxes.
	aliceSB, bobSB string
}

func newSkillFixture(t *testing.T, mutate ...func(*Config)) *skillFixture {
	t.Helper()
	st := sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "skills.db"))
	t.Cleanup(func() { st.Close() })
	f := &skillFixture{st: st, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	core, _ := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img"}}})
	for owner, id := range map[string]*string{"alice": &f.aliceSB, "bob": &f.bobSB} {
		sb, err := core.Create(context.Background(), sandboxes.CreateRequest{Owner: owner, Profile: "base"})
		if err != nil {
			t.Fatal(err)
		}
		*id = sb.ID
	}
	cfg := Config{Sandboxes: core, History: st, Skills: st, Now: func() time.Time { return f.now }}
	for _, m := range mutate {
		m(&cfg)
	}
	f.svc = New(cfg)
	f.aliceExec = f.exec(t, f.aliceSB, true, 10, "")
	f.bob = f.exec(t, f.bobSB, true, 10, "")
	return f
}

// exec records an execution of sandbox sb at the fixture's now.
func (f *skillFixture) exec(t *testing.T, sb string, ok bool, ms int64, tags string) string {
	t.Helper()
	id := NewID("exec-")
	e := &sandboxes.HistoryEntry{ID: id, SandboxID: sb, ExecType: "shell", Code: "x", Success: ok, ExecutionTimeMS: ms, CreatedAt: f.now}
	if tags != "" {
		e.Tags = &tags
	}
	if err := f.st.AddHistory(e); err != nil {
		t.Fatal(err)
	}
	return id
}

var alice, bob = Principal{Owner: "alice"}, Principal{Owner: "bob"}

// release makes a candidate of key from alice's execution, evaluates it passed and promotes it to stage.
func (f *skillFixture) release(t *testing.T, key, stage string) (*SkillCandidate, *SkillRelease) {
	t.Helper()
	ctx := context.Background()
	c, err := f.svc.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: key, SourceExecutionIDs: []string{f.aliceExec}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.EvaluateSkillCandidate(ctx, alice, c.ID, NewSkillEvaluation{Passed: true}); err != nil {
		t.Fatal(err)
	}
	r, err := f.svc.PromoteSkillCandidate(ctx, alice, c.ID, SkillPromotion{Stage: stage})
	if err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(time.Second)
	return c, r
}

// TestSkillVersions: versions count per skill key and never repeat (a deleted release's included); one release of
// a key is active; a rollback re-releases the version before with its stage and rolls the current candidate back.
func TestSkillVersions(t *testing.T) {
	ctx := context.Background()
	f := newSkillFixture(t)
	_, a1 := f.release(t, "a", StageStable)
	_, b1 := f.release(t, "b", "")
	c2, a2 := f.release(t, "a", StageCanary)
	if a1.Version != 1 || b1.Version != 1 || a2.Version != 2 || b1.Stage != StageCanary {
		t.Fatalf("versions: a1 %d b1 %d a2 %d, b1 stage %s", a1.Version, b1.Version, a2.Version, b1.Stage)
	}
	active, _, err := f.svc.SkillReleases(ctx, alice, SkillQuery{ActiveOnly: true, Limit: 10})
	if err != nil || len(active) != 2 || active[0].ID != a2.ID || active[1].ID != b1.ID {
		t.Fatalf("active: %+v %v", active, err)
	}
	a3, err := f.svc.RollbackSkillRelease(ctx, alice, a2.ID)
	if err != nil || a3.Version != 3 || *a3.RollbackOf != a2.ID || a3.CandidateID != a1.CandidateID || a3.Stage != StageStable || !a3.IsActive {
		t.Fatalf("rollback: %+v %v", a3, err)
	}
	if c, _ := f.svc.SkillCandidate(ctx, alice, c2.ID); c.Status != SkillRolledBack {
		t.Errorf("rolled-back candidate: %s", c.Status)
	}
	if _, err := f.svc.DeleteSkillRelease(ctx, alice, a3.ID, nil); err != nil {
		t.Fatal(err)
	}
	_, a4 := f.release(t, "a", StageStable)
	if a4.Version != 4 {
		t.Errorf("a version after a deleted one: %d, want 4", a4.Version)
	}
	// Rolling back v4 skips the deleted v3: v2 is released again.
	a5, err := f.svc.RollbackSkillRelease(ctx, alice, a4.ID)
	if err != nil || a5.CandidateID != a2.CandidateID || a5.Version != 5 {
		t.Errorf("rollback over a deleted release: %+v %v", a5, err)
	}
	if _, err := f.svc.RollbackSkillRelease(ctx, alice, b1.ID); codeOf(err) != CodeConflict {
		t.Errorf("rollback of a first version: %v", err)
	}
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return AsError(err).Code
}

// TestSkillCandidateStatuses walks a candidate through evaluations: evaluating after a pass, rejected after a
// failure, promotable only while the latest evaluation passed.
func TestSkillCandidateStatuses(t *testing.T) {
	ctx := context.Background()
	f := newSkillFixture(t)
	c, err := f.svc.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: " k ", SourceExecutionIDs: []string{f.aliceExec}})
	if err != nil || c.SkillKey != "k" || c.Status != SkillDraft {
		t.Fatalf("create: %+v %v", c, err)
	}
	steps := []struct {
		passed      bool
		status      string
		promoteCode string
	}{
		{true, SkillEvaluating, ""},
		{false, SkillRejected, CodeConflict},
		{true, SkillEvaluating, ""},
	}
	for i, s := range steps {
		score := float64(i)
		if _, err := f.svc.EvaluateSkillCandidate(ctx, alice, c.ID, NewSkillEvaluation{Passed: s.passed, Score: &score}); err != nil {
			t.Fatal(err)
		}
		got, _ := f.svc.SkillCandidate(ctx, alice, c.ID)
		if got.Status != s.status || *got.LatestPass != s.passed || *got.LatestScore != score || got.LastEvaluatedAt == nil {
			t.Errorf("step %d: %+v", i, got)
		}
		if s.promoteCode != "" {
			if _, err := f.svc.PromoteSkillCandidate(ctx, alice, c.ID, SkillPromotion{}); codeOf(err) != s.promoteCode {
				t.Errorf("step %d promote: %v", i, err)
			}
		}
	}
	if r, err := f.svc.PromoteSkillCandidate(ctx, alice, c.ID, SkillPromotion{}); err != nil || r.Stage != StageCanary {
		t.Fatalf("promote: %+v %v", r, err)
	}
	if got, _ := f.svc.SkillCandidate(ctx, alice, c.ID); got.Status != SkillPromoted || got.PromotionReleaseID == nil {
		t.Errorf("promoted: %+v", got)
	}
}

// TestSkillErrors: bad input and missing records answer typed errors, and nothing is stored for them.
func TestSkillErrors(t *testing.T) {
	ctx := context.Background()
	f := newSkillFixture(t)
	long := strings.Repeat("x", MaxSkillText+1)
	nan := math.NaN()
	tests := []struct {
		name string
		call func(*Service) error
		code string
	}{
		{"no store", func(*Service) error {
			_, _, err := New(Config{}).SkillCandidates(ctx, alice, SkillQuery{Limit: 1})
			return err
		}, CodeCapability},
		{"no owner", func(s *Service) error { _, err := s.SkillPayload(ctx, Principal{Admin: true}, "blob:x"); return err }, CodeForbidden},
		{"empty key", func(s *Service) error {
			_, err := s.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: " ", SourceExecutionIDs: []string{f.aliceExec}})
			return err
		}, CodeValidation},
		{"no sources", func(s *Service) error {
			_, err := s.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: "k"})
			return err
		}, CodeValidation},
		{"bob's execution as alice's evidence", func(s *Service) error {
			_, err := s.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: "k", SourceExecutionIDs: []string{f.aliceExec, f.bob}})
			return err
		}, CodeValidation},
		{"summary too long", func(s *Service) error {
			_, err := s.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: "k", SourceExecutionIDs: []string{f.aliceExec}, Summary: &long})
			return err
		}, CodeValidation},
		{"preconditions too long", func(s *Service) error {
			_, err := s.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: "k", SourceExecutionIDs: []string{f.aliceExec},
				Preconditions: map[string]any{"x": long}})
			return err
		}, CodeValidation},
		{"NaN score", func(s *Service) error {
			_, err := s.EvaluateSkillCandidate(ctx, alice, "sc-x", NewSkillEvaluation{Score: &nan})
			return err
		}, CodeValidation},
		{"unknown candidate", func(s *Service) error {
			_, err := s.EvaluateSkillCandidate(ctx, alice, "sc-x", NewSkillEvaluation{})
			return err
		}, CodeNotFound},
		{"bad status", func(s *Service) error {
			_, _, err := s.SkillCandidates(ctx, alice, SkillQuery{Status: "x", Limit: 1})
			return err
		}, CodeValidation},
		{"bad stage", func(s *Service) error {
			_, _, err := s.SkillReleases(ctx, alice, SkillQuery{Stage: "x", Limit: 1})
			return err
		}, CodeValidation},
		{"limit 0", func(s *Service) error { _, _, err := s.SkillReleases(ctx, alice, SkillQuery{}); return err }, CodeValidation},
		{"negative offset", func(s *Service) error {
			_, _, err := s.SkillReleases(ctx, alice, SkillQuery{Limit: 1, Offset: -1})
			return err
		}, CodeValidation},
		{"payload a string", func(s *Service) error {
			_, err := s.CreateSkillPayload(ctx, alice, "", json.RawMessage(`"x"`))
			return err
		}, CodeValidation},
		{"payload not JSON", func(s *Service) error {
			_, err := s.CreateSkillPayload(ctx, alice, "", json.RawMessage(`{`))
			return err
		}, CodeValidation},
		{"payload too big", func(s *Service) error {
			_, err := s.CreateSkillPayload(ctx, alice, "", json.RawMessage(`["`+strings.Repeat("x", MaxSkillPayload)+`"]`))
			return err
		}, CodePayloadTooLarge},
		{"unsupported ref", func(s *Service) error { _, err := s.SkillPayload(ctx, alice, "s3://x"); return err }, CodeValidation},
		{"empty ref", func(s *Service) error { _, err := s.SkillPayload(ctx, alice, "blob:"); return err }, CodeValidation},
		{"unknown ref", func(s *Service) error { _, err := s.SkillPayload(ctx, alice, "blob:blob-x"); return err }, CodeNotFound},
		{"unknown release health", func(s *Service) error { _, err := s.SkillReleaseHealth(ctx, alice, "sr-x"); return err }, CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(f.svc); codeOf(err) != tc.code {
				t.Errorf("got %v, want %s", err, tc.code)
			}
		})
	}
	if cs, total, _ := f.svc.SkillCandidates(ctx, alice, SkillQuery{Limit: 10}); total != 0 || len(cs) != 0 {
		t.Errorf("a refused create stored a candidate: %+v", cs)
	}
}

// TestSkillQuota: an owner's records of a kind stop at the limit (quota_exceeded); another owner is not affected.
func TestSkillQuota(t *testing.T) {
	ctx := context.Background()
	f := newSkillFixture(t, func(c *Config) { c.MaxSkillRecords = 2 })
	for i, want := range []string{"", "", CodeQuotaExceeded} {
		if _, err := f.svc.CreateSkillPayload(ctx, alice, "", json.RawMessage(`{}`)); codeOf(err) != want {
			t.Errorf("payload %d: %v, want %q", i, err, want)
		}
	}
	if _, err := f.svc.CreateSkillPayload(ctx, bob, "", json.RawMessage(`[]`)); err != nil {
		t.Errorf("bob's first payload: %v", err)
	}
}

// TestSkillHealth measures releases from tagged executions in their window against the version before, and falls
// back to the previous candidate's evaluation report when that version has no samples.
func TestSkillHealth(t *testing.T) {
	ctx := context.Background()
	f := newSkillFixture(t)
	// v1: its candidate's evaluation report says replays succeeded 99% of the time.
	c1, err := f.svc.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: "h", SourceExecutionIDs: []string{f.aliceExec}})
	if err != nil {
		t.Fatal(err)
	}
	report := `{"replay_success":0.99,"samples":50,"p95_duration":120}`
	if _, err := f.svc.EvaluateSkillCandidate(ctx, alice, c1.ID, NewSkillEvaluation{Passed: true, Report: &report}); err != nil {
		t.Fatal(err)
	}
	v1, _ := f.svc.PromoteSkillCandidate(ctx, alice, c1.ID, SkillPromotion{})
	f.now = f.now.Add(time.Minute)
	_, v2 := f.release(t, "h", StageCanary)
	tag := "a,release:" + v2.ID
	for i, ok := range []bool{true, true, true, false} {
		f.exec(t, f.aliceSB, ok, int64(100*(i+1)), tag)
	}
	f.exec(t, f.aliceSB, false, 1, "release:"+v2.ID+"x") // another tag, not counted
	f.exec(t, f.bobSB, false, 1, tag)                    // bob's execution, not alice's evidence
	h, err := f.svc.SkillReleaseHealth(ctx, alice, v2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h.Samples != 4 || h.SuccessRate != 0.75 || h.P95Duration != 400 || h.BaselineSamples != 50 || h.BaselineSuccessRate != 0.99 ||
		!h.ShouldRollback || h.Healthy || h.WindowComplete || len(h.RollbackReasons) != 2 {
		t.Errorf("v2 health: %+v", h)
	}
	if h, _ := f.svc.SkillReleaseHealth(ctx, alice, v1.ID); h.Samples != 0 || h.Healthy || h.ShouldRollback || h.BaselineSuccessRate != 1 {
		t.Errorf("v1 health (no samples): %+v", h)
	}
	// Executions after the window do not count.
	f.now = v2.PromotedAt.Add(25 * time.Hour)
	f.exec(t, f.aliceSB, false, 1, tag)
	if h, _ := f.svc.SkillReleaseHealth(ctx, alice, v2.ID); h.Samples != 4 || !h.WindowComplete {
		t.Errorf("after the window: %+v", h)
	}
}

func TestBaselineFromReport(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		report *string
		want   skillMetrics
	}{
		{nil, skillMetrics{successRate: 1}},
		{s("pass"), skillMetrics{successRate: 1}},
		{s(`{"replay_success":0.75}`), skillMetrics{successRate: 0.75, errorRate: 0.25}},
		{s(`{"replay_success":1.5,"error_rate":-1,"samples":-3}`), skillMetrics{successRate: 1}},
		{s(`{"replay_success":0.5,"error_rate":0.1,"samples":7,"p95_duration":9}`), skillMetrics{samples: 7, successRate: 0.5, errorRate: 0.1, p95: 9}},
		{s(`[1]`), skillMetrics{successRate: 1}},
	}
	for _, tc := range tests {
		if got := baselineFromReport(tc.report); got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.report, got, tc.want)
		}
	}
}

func TestAggregateSkillMetrics(t *testing.T) {
	tests := []struct {
		durations []int64
		ok        int
		want      skillMetrics
	}{
		{nil, 0, skillMetrics{}},
		{[]int64{5}, 1, skillMetrics{samples: 1, successRate: 1, p95: 5}},
		{[]int64{3, 1, 2, 4}, 2, skillMetrics{samples: 4, successRate: 0.5, errorRate: 0.5, p95: 4}},
		{[]int64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 20, skillMetrics{samples: 20, successRate: 1, p95: 19}},
	}
	for _, tc := range tests {
		if got := aggregateSkillMetrics(tc.durations, tc.ok); got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.durations, got, tc.want)
		}
	}
}

// FuzzSkillPayloadRef: any ref a tenant sends is either refused with a typed error or names a bounded id.
func FuzzSkillPayloadRef(f *testing.F) {
	for _, s := range []string{"blob:blob-0123", "blob:", "s3://x", "", "blob:../../x", "BLOB:x", "blob:\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		id, err := ParseSkillPayloadRef(ref)
		if err != nil {
			if codeOf(err) != CodeValidation {
				t.Fatalf("%q: %v", ref, err)
			}
			return
		}
		if id == "" || len(id) > MaxSkillKey || "blob:"+id != ref {
			t.Fatalf("%q: id %q", ref, id)
		}
	})
}

// FuzzSkillReport: an evaluation report is tenant text; the baseline read from it stays within [0, 1].
func FuzzSkillReport(f *testing.F) {
	for _, s := range []string{`{"replay_success":0.5}`, `{"error_rate":1e309}`, `{"samples":-1}`, `pass`, `{"replay_success":"x"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, report string) {
		m := baselineFromReport(&report)
		for _, r := range []float64{m.successRate, m.errorRate} {
			if math.IsNaN(r) || r < 0 || r > 1 {
				t.Fatalf("%q: %+v", report, m)
			}
		}
		if m.samples < 0 || m.p95 < 0 {
			t.Fatalf("%q: %+v", report, m)
		}
	})
}

func TestMergeSkillTags(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"", " , "}, ""},
		{[]string{"b, a", "a", "skill:x"}, "a,b,skill:x"},
		{[]string{"release:sr-1", "stage:canary", " mine "}, "mine,release:sr-1,stage:canary"},
	} {
		if got := MergeSkillTags(tc.in...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHistoryFilter(t *testing.T) {
	s := func(v string) *string { return &v }
	e := &sandboxes.HistoryEntry{ExecType: "shell", Success: true, Tags: s("etl, release:sr-1"), Notes: s("n")}
	for _, tc := range []struct {
		f    HistoryFilter
		keep bool
	}{
		{HistoryFilter{}, true},
		{HistoryFilter{ExecType: "shell", SuccessOnly: true, HasNotes: true}, true},
		{HistoryFilter{ExecType: "python"}, false},
		{HistoryFilter{HasDescription: true}, false},
		{HistoryFilter{Tags: "x, release:sr-1"}, true},
		{HistoryFilter{Tags: "release:sr"}, false},
		{HistoryFilter{Tags: " , "}, true},
	} {
		if got := tc.f.Keep()(e); got != tc.keep {
			t.Errorf("%+v: %v", tc.f, got)
		}
	}
}
