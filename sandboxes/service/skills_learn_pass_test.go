package service

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// learnRun records a browser batch of sandbox sb with learn on: each command succeeds unless it is in fail.
func (f *skillFixture) learnRun(t *testing.T, sb, tags, desc string, commands []string, fail ...string) string {
	t.Helper()
	run := BrowserRun{Batch: true, Commands: commands, Success: true, Elapsed: time.Second}
	for _, c := range commands {
		exit := 0
		if slices.Contains(fail, c) {
			exit, run.Success = 1, false
		}
		run.Steps = append(run.Steps, BrowserStep{Cmd: c, Stdout: "out of " + c, ExitCode: exit})
	}
	ev := BrowserEvidence{Learn: true}
	if tags != "" {
		ev.Tags = &tags
	}
	if desc != "" {
		ev.Description = &desc
	}
	id, _ := f.svc.RecordBrowser(context.Background(), sb, run, ev)
	f.now = f.now.Add(time.Second)
	return id
}

// entry reads one history entry of sandbox sb.
func (f *skillFixture) entry(t *testing.T, sb, id string) *sandboxes.HistoryEntry {
	t.Helper()
	page, _, err := f.st.HistoryPage(sb, func(e *sandboxes.HistoryEntry) bool { return e.ID == id }, 0, 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("history entry %s of %s: %v (%d)", id, sb, err, len(page))
	}
	return page[0]
}

func (f *skillFixture) candidates(t *testing.T, p Principal) []*SkillCandidate {
	t.Helper()
	cs, _, err := f.svc.SkillCandidates(context.Background(), p, SkillQuery{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (f *skillFixture) releases(t *testing.T, p Principal) []*SkillRelease {
	t.Helper()
	rs, _, err := f.svc.SkillReleases(context.Background(), p, SkillQuery{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestLearnBrowserRuns: each kind of run ends in Bay's status, with Bay's candidate, evaluation and release.
func TestLearnBrowserRuns(t *testing.T) {
	three := []string{"open https://example.com", "eval document.title = 'x'", "screenshot"}
	for _, tc := range []struct {
		name        string
		commands    []string
		fail        []string
		autoRelease bool
		status      string
		learnErr    *string
		candidate   string // status of the one candidate; "" none
		reason      string
		released    bool
	}{
		{"three actions: automatic canary", three, nil, true, LearnProcessed, nil, "promoted_canary", "threshold_passed", true},
		{"automatic releases off", three, nil, false, LearnProcessed, nil, SkillEvaluating, "auto_release_disabled", false},
		{"two actions: rejected", three[:2], nil, true, LearnProcessed, nil, SkillRejected, "threshold_not_met", false},
		{"read-only only: skipped", []string{"get title", "snapshot -i"}, nil, true, LearnSkipped, strPtr(learnNoSegment), "", "", false},
		{"failures leave one step: skipped", three, []string{"eval document.title = 'x'"}, true, LearnSkipped, strPtr(learnNoSegment), "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSkillFixture(t)
			ctx := context.Background()
			id := f.learnRun(t, f.aliceSB, "skill:shop-login,trace", "Log in to the shop", tc.commands, tc.fail...)
			pol := DefaultLearnPolicy()
			pol.AutoRelease = tc.autoRelease
			if _, err := f.svc.LearnBrowserRuns(ctx, pol); err != nil {
				t.Fatal(err)
			}
			e := f.entry(t, f.aliceSB, id)
			if *e.LearnStatus != tc.status || !reflect2(e.LearnError, tc.learnErr) || e.LearnProcessedAt == nil {
				t.Fatalf("entry learn_status %v error %v at %v, want %s %v", *e.LearnStatus, e.LearnError, e.LearnProcessedAt, tc.status, tc.learnErr)
			}
			cs := f.candidates(t, alice)
			if tc.candidate == "" {
				if len(cs) != 0 {
					t.Fatalf("candidates %+v, want none", cs)
				}
				return
			}
			if len(cs) != 1 {
				t.Fatalf("%d candidates, want 1", len(cs))
			}
			c := cs[0]
			if c.Status != tc.candidate || c.SkillType != SkillTypeBrowser || c.SkillKey != "shop-login" || *c.ScenarioKey != "log-in-to-the-shop" ||
				*c.CreatedBy != "system:auto" || *c.AutoReleaseReason != tc.reason || c.AutoReleaseEligible != (tc.reason == "threshold_passed") ||
				!slices.Equal(c.SourceExecutionIDs, []string{id}) {
				t.Fatalf("candidate %+v", c)
			}
			blob, err := f.svc.SkillPayload(ctx, alice, *c.PayloadRef)
			if err != nil {
				t.Fatal(err)
			}
			var payload struct {
				SkillType string   `json:"skill_type"`
				Source    string   `json:"source_execution_id"`
				Commands  []string `json:"commands"`
			}
			if json.Unmarshal(blob.Payload, &payload); blob.Kind != "browser_segment" || payload.SkillType != "browser" || payload.Source != id ||
				!slices.Equal(payload.Commands, tc.commands) {
				t.Fatalf("payload %s %s", blob.Kind, blob.Payload)
			}
			rs := f.releases(t, alice)
			if !tc.released {
				if len(rs) != 0 {
					t.Fatalf("releases %+v, want none", rs)
				}
				return
			}
			if len(rs) != 1 || rs[0].ReleaseMode != ReleaseAuto || rs[0].Stage != StageCanary || *rs[0].PromotedBy != "system:auto" ||
				rs[0].HealthWindowEndAt == nil || !rs[0].HealthWindowEndAt.Equal(rs[0].PromotedAt.Add(24*time.Hour)) || rs[0].AutoPromotedFrom != nil {
				t.Fatalf("releases %+v", rs)
			}
			rel, cmds, err := f.svc.BrowserSkill(ctx, alice, "shop-login")
			if err != nil || rel.ID != rs[0].ID || !slices.Equal(cmds, tc.commands) {
				t.Fatalf("the release replays %v (%v), want %v", cmds, err, tc.commands)
			}
		})
	}
}

func reflect2(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestLearnOnce: a run is learned once, by repeated passes, by a pass after a restart that lost the mark (the
// records written, the entry still pending), and by two Services over one store.
func TestLearnOnce(t *testing.T) {
	f := newSkillFixture(t)
	ctx := context.Background()
	id := f.learnRun(t, f.aliceSB, "skill:k", "", []string{"open a", "eval 1", "eval 2"})
	pol := DefaultLearnPolicy()
	if res, err := f.svc.LearnBrowserRuns(ctx, pol); err != nil || res.Processed != 1 || res.Candidates != 1 || res.PromotedCanary != 1 {
		t.Fatalf("first pass %+v %v", res, err)
	}
	if res, err := f.svc.LearnBrowserRuns(ctx, pol); err != nil || res.Processed != 0 {
		t.Fatalf("second pass %+v %v", res, err)
	}
	// The gateway stopped after the records were written but before the run was marked.
	if _, _, err := f.st.UpdateHistory(f.aliceSB, id, func(e *sandboxes.HistoryEntry) { e.LearnStatus = strPtr(LearnPending) }); err != nil {
		t.Fatal(err)
	}
	restarted := New(f.svc.cfg)
	if res, err := restarted.LearnBrowserRuns(ctx, pol); err != nil || res.Processed != 1 || res.Candidates != 0 || res.PromotedCanary != 0 {
		t.Fatalf("pass after the restart %+v %v", res, err)
	}
	if n, r := len(f.candidates(t, alice)), len(f.releases(t, alice)); n != 1 || r != 1 {
		t.Fatalf("%d candidates and %d releases after three passes, want 1 and 1", n, r)
	}
	if *f.entry(t, f.aliceSB, id).LearnStatus != LearnProcessed {
		t.Fatal("the run is not marked processed")
	}
}

// TestLearnOwnerScoped is the attack: alice's learn run names bob's skill key (skill:shared), which bob has
// released. Her run becomes her candidate and release only: bob's skill still replays bob's commands, and bob has
// no record of hers.
func TestLearnOwnerScoped(t *testing.T) {
	f := newSkillFixture(t)
	ctx := context.Background()
	blob, err := f.svc.CreateSkillPayload(ctx, bob, "", json.RawMessage(`{"commands":["open https://bob.example"]}`))
	if err != nil {
		t.Fatal(err)
	}
	ref := blob.Ref()
	c, err := f.svc.CreateSkillCandidate(ctx, bob, NewSkillCandidate{SkillKey: "shared", SourceExecutionIDs: []string{f.bob}, PayloadRef: &ref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.EvaluateSkillCandidate(ctx, bob, c.ID, NewSkillEvaluation{Passed: true}); err != nil {
		t.Fatal(err)
	}
	bobRel, err := f.svc.PromoteSkillCandidate(ctx, bob, c.ID, SkillPromotion{})
	if err != nil {
		t.Fatal(err)
	}
	evil := []string{"open https://evil.example", "eval steal()", "eval send()"}
	f.learnRun(t, f.aliceSB, "skill:shared", "", evil)
	if _, err := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); err != nil {
		t.Fatal(err)
	}
	rel, cmds, err := f.svc.BrowserSkill(ctx, bob, "shared")
	if err != nil || rel.ID != bobRel.ID || !slices.Equal(cmds, []string{"open https://bob.example"}) {
		t.Fatalf("bob's skill replays %v (release %v, %v)", cmds, rel, err)
	}
	if cs, rs := f.candidates(t, bob), f.releases(t, bob); len(cs) != 1 || len(rs) != 1 {
		t.Fatalf("bob has %d candidates and %d releases, want his 1 and 1", len(cs), len(rs))
	}
	rel, cmds, err = f.svc.BrowserSkill(ctx, alice, "shared")
	if err != nil || !slices.Equal(cmds, evil) || rel.AutoPromotedFrom != nil {
		t.Fatalf("alice's skill replays %v (release %+v, %v)", cmds, rel, err)
	}
	// A learned run's trace is alice's too: bob cannot read it as a payload either.
	for _, cand := range f.candidates(t, alice) {
		if _, err := f.svc.SkillPayload(ctx, bob, *cand.PayloadRef); AsError(err).Code != CodeNotFound {
			t.Fatalf("bob reads alice's segment: %v", err)
		}
	}
}

// TestLearnQuota: a run whose records would pass the owner's quota is "error" and keeps none of them.
func TestLearnQuota(t *testing.T) {
	f := newSkillFixture(t, func(c *Config) { c.MaxSkillRecords = 1 })
	ctx := context.Background()
	if _, err := f.svc.CreateSkillPayload(ctx, alice, "", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	id := f.learnRun(t, f.aliceSB, "", "", []string{"open a", "eval 1", "eval 2"})
	if res, err := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); err != nil || res.Errored != 1 {
		t.Fatalf("pass %+v %v", res, err)
	}
	e := f.entry(t, f.aliceSB, id)
	if *e.LearnStatus != LearnError || e.LearnError == nil || len(f.candidates(t, alice)) != 0 {
		t.Fatalf("entry %v %v, candidates %d", *e.LearnStatus, e.LearnError, len(f.candidates(t, alice)))
	}
}

// TestLearnBatch: a pass learns at most Batch runs, the oldest first; the next pass the rest.
func TestLearnBatch(t *testing.T) {
	f := newSkillFixture(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		ids = append(ids, f.learnRun(t, f.aliceSB, "", "", []string{"get title"}))
	}
	pol := DefaultLearnPolicy()
	pol.Batch = 2
	if res, err := f.svc.LearnBrowserRuns(ctx, pol); err != nil || res.Skipped != 2 {
		t.Fatalf("pass %+v %v", res, err)
	}
	if *f.entry(t, f.aliceSB, ids[2]).LearnStatus != LearnPending || *f.entry(t, f.aliceSB, ids[0]).LearnStatus != LearnSkipped {
		t.Fatal("the pass did not take the oldest runs")
	}
	if res, err := f.svc.LearnBrowserRuns(ctx, pol); err != nil || res.Skipped != 1 {
		t.Fatalf("second pass %+v %v", res, err)
	}
}

// TestAutoCanaries: a healthy automatic canary is released as stable once its window ends; an unhealthy one is
// rolled back automatically.
func TestAutoCanaries(t *testing.T) {
	t.Run("healthy becomes stable", func(t *testing.T) {
		f := newSkillFixture(t)
		ctx := context.Background()
		f.learnRun(t, f.aliceSB, "skill:k", "", []string{"open a", "eval 1", "eval 2"})
		if _, err := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); err != nil {
			t.Fatal(err)
		}
		canary := f.releases(t, alice)[0]
		f.exec(t, f.aliceSB, true, 10, "release:"+canary.ID)
		if res, _ := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); res.PromotedStable != 0 {
			t.Fatal("promoted before its window ended")
		}
		f.now = f.now.Add(25 * time.Hour)
		if res, err := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); err != nil || res.PromotedStable != 1 {
			t.Fatalf("pass %+v %v", res, err)
		}
		rs := f.releases(t, alice)
		if len(rs) != 2 || rs[0].Stage != StageStable || rs[0].ReleaseMode != ReleaseAuto || *rs[0].AutoPromotedFrom != canary.ID || !rs[0].IsActive || rs[1].IsActive {
			t.Fatalf("releases %+v", rs)
		}
		if c := f.candidates(t, alice)[0]; c.Status != "promoted_stable" {
			t.Fatalf("candidate %s", c.Status)
		}
		if res, _ := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); res.PromotedStable != 0 {
			t.Fatal("promoted twice")
		}
	})
	t.Run("unhealthy is rolled back", func(t *testing.T) {
		f := newSkillFixture(t)
		ctx := context.Background()
		_, manual := f.release(t, "k", StageStable)
		f.learnRun(t, f.aliceSB, "skill:k", "", []string{"open a", "eval 1", "eval 2"})
		if _, err := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); err != nil {
			t.Fatal(err)
		}
		rs := f.releases(t, alice)
		canary := rs[0]
		if canary.ReleaseMode != ReleaseAuto || *canary.AutoPromotedFrom != manual.ID {
			t.Fatalf("canary %+v", canary)
		}
		f.exec(t, f.aliceSB, false, 10, "release:"+canary.ID)
		if res, err := f.svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); err != nil || res.RolledBack != 1 {
			t.Fatalf("pass %+v %v", res, err)
		}
		rs = f.releases(t, alice)
		back := rs[0]
		if back.ReleaseMode != ReleaseAuto || *back.RollbackOf != canary.ID || *back.AutoPromotedFrom != canary.ID || back.CandidateID != manual.CandidateID || !back.IsActive {
			t.Fatalf("rollback %+v", back)
		}
	})
}

// TestSkillPayloadServesTraces: GET /v1/skills/payloads/{ref} reads a browser trace by its ref (kind browser_trace),
// under the traces' rule: another owner's is not found.
func TestSkillPayloadServesTraces(t *testing.T) {
	f := newSkillFixture(t)
	ctx := context.Background()
	id, ref := f.svc.RecordBrowser(ctx, f.aliceSB, BrowserRun{Commands: []string{"open a"}, Steps: []BrowserStep{{Cmd: "open a"}}, Success: true},
		BrowserEvidence{IncludeTrace: true})
	if ref == nil {
		t.Fatal("no trace ref")
	}
	blob, err := f.svc.SkillPayload(ctx, alice, *ref)
	if err != nil {
		t.Fatal(err)
	}
	trace, err := f.svc.BrowserTrace(ctx, alice, f.aliceSB, *ref)
	if err != nil || blob.Kind != TraceKindPayload || string(blob.Payload) != string(trace) {
		t.Fatalf("payload %s %s, trace %s %v", blob.Kind, blob.Payload, trace, err)
	}
	if _, err := f.svc.SkillPayload(ctx, bob, *ref); AsError(err).Code != CodeNotFound {
		t.Fatalf("bob reads alice's trace %s (%s): %v", *ref, id, err)
	}
	if _, err := f.svc.SkillPayload(ctx, alice, "blob:blob-000000000000"); AsError(err).Code != CodeNotFound {
		t.Fatalf("unknown ref: %v", err)
	}
}

// TestRunBrowserLearning: the loop learns a run as soon as it is recorded (not at its next interval), and ends
// with its context.
func TestRunBrowserLearning(t *testing.T) {
	f := newSkillFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pol := DefaultLearnPolicy()
	pol.Interval = time.Hour
	done := make(chan struct{})
	go func() { f.svc.RunBrowserLearning(ctx, pol); close(done) }()
	// Recorded directly, not with f.learnRun, which moves the fixture's clock the loop reads.
	cmds := []string{"open a", "eval 1", "eval 2"}
	run := BrowserRun{Batch: true, Commands: cmds, Success: true}
	for _, c := range cmds {
		run.Steps = append(run.Steps, BrowserStep{Cmd: c})
	}
	id, _ := f.svc.RecordBrowser(ctx, f.aliceSB, run, BrowserEvidence{Learn: true})
	for *f.entry(t, f.aliceSB, id).LearnStatus == LearnPending {
		select {
		case <-ctx.Done():
			t.Fatal("the recorded run was never learned")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if e := f.entry(t, f.aliceSB, id); *e.LearnStatus != LearnProcessed {
		t.Fatalf("learn_status %s", *e.LearnStatus)
	}
	cancel()
	<-done
}

// TestLearnDedup: a run repeating the commands of a learned candidate of its skill key makes no new candidate (and
// is still processed); the same commands under another key do.
func TestLearnDedup(t *testing.T) {
	f := newSkillFixture(t)
	ctx := context.Background()
	cmds := []string{"open a", "eval 1"}
	f.learnRun(t, f.aliceSB, "skill:login", "", cmds)
	f.learnRun(t, f.aliceSB, "skill:login", "", cmds)
	pol := DefaultLearnPolicy()
	if res, err := f.svc.LearnBrowserRuns(ctx, pol); err != nil || res.Processed != 2 || res.Candidates != 1 {
		t.Fatalf("pass %+v %v", res, err)
	}
	f.learnRun(t, f.aliceSB, "skill:checkout", "", cmds)
	if res, err := f.svc.LearnBrowserRuns(ctx, pol); err != nil || res.Processed != 1 || res.Candidates != 1 {
		t.Fatalf("second pass %+v %v", res, err)
	}
	cs := f.candidates(t, alice)
	if len(cs) != 2 || cs[0].PayloadHash == nil || cs[1].PayloadHash == nil || *cs[0].PayloadHash != *cs[1].PayloadHash || cs[0].SkillKey == cs[1].SkillKey {
		t.Fatalf("candidates %+v", cs)
	}
	// A caller's candidate has no payload hash.
	c, err := f.svc.CreateSkillCandidate(ctx, alice, NewSkillCandidate{SkillKey: "login", SourceExecutionIDs: []string{f.aliceExec}})
	if err != nil || c.PayloadHash != nil {
		t.Fatalf("manual candidate %+v %v", c, err)
	}
}
