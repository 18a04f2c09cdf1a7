package service

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// scanOnly hides the store's learn queue: the pass then reads every sandbox's whole history, as it always did.
type scanOnly struct{ HistoryStore }

// pad records n shell executions of sandbox sb: a long history with nothing to learn.
func (f *skillFixture) pad(t testing.TB, sb string, n int) {
	t.Helper()
	for i := range n {
		e := &sandboxes.HistoryEntry{ID: fmt.Sprintf("pad-%s-%04d", sb, i), SandboxID: sb, ExecType: "shell", Code: "x", Success: true, CreatedAt: f.now}
		if err := f.st.AddHistory(e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLearnPassIncremental: with long histories, a pass after a pass with nothing new recorded reads no history
// entry; a run recorded after a pass is learned by the next one, which reads that run only (once to find it, once
// to mark it); the queue survives a restart, and a deleted sandbox leaves nothing waiting.
func TestLearnPassIncremental(t *testing.T) {
	f := newSkillFixture(t)
	ctx := context.Background()
	f.pad(t, f.aliceSB, 500)
	f.pad(t, f.bobSB, 500)
	pol := DefaultLearnPolicy()
	pol.AutoRelease = false // no automatic canary: its health reads the owner's executions (skills_health.go)
	cmds := []string{"open a", "eval 1", "eval 2"}
	first := f.learnRun(t, f.aliceSB, "skill:k", "", cmds)
	f.learnRun(t, f.bobSB, "skill:k", "", []string{"get title"})
	pass := func(label string) (LearnResult, uint64) {
		t.Helper()
		f.st.HistorySandboxes() // waits for the queued history, so the count is the pass's alone
		before := f.st.HistoryEntriesRead()
		res, err := f.svc.LearnBrowserRuns(ctx, pol)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		return res, f.st.HistoryEntriesRead() - before
	}
	if res, read := pass("first pass"); res.Processed != 1 || res.Skipped != 1 || res.Candidates != 1 || read != 4 {
		t.Fatalf("first pass %+v reading %d entries, want 1 processed, 1 skipped, 1 candidate reading 4 (2 found, 2 marked)", res, read)
	}
	for i := range 3 {
		if res, read := pass("idle pass"); res != (LearnResult{}) || read != 0 {
			t.Fatalf("idle pass %d: %+v reading %d entries, want nothing reading 0", i, res, read)
		}
	}

	second := f.learnRun(t, f.aliceSB, "skill:k2", "", cmds)
	f.pad(t, f.aliceSB, 10)
	if res, read := pass("pass after a new run"); res.Processed != 1 || res.Candidates != 1 || read != 2 {
		t.Fatalf("pass after a new run %+v reading %d entries, want 1 processed reading 2", res, read)
	}
	for _, id := range []string{first, second} {
		if e := f.entry(t, f.aliceSB, id); *e.LearnStatus != LearnProcessed {
			t.Fatalf("run %s is %s", id, *e.LearnStatus)
		}
	}

	// A run recorded, then the gateway stopped before any pass (kill -9 loses nothing committed): the reopened
	// store still has it waiting, and a new Service learns it.
	third := f.learnRun(t, f.bobSB, "skill:k3", "", cmds)
	f.st.HistorySandboxes()
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	st := sandboxes.NewBoltStore(f.st.Path())
	t.Cleanup(func() { st.Close() })
	cfg := f.svc.cfg
	cfg.History, cfg.Skills = st, st
	f.svc, f.st = New(cfg), st
	if res, read := pass("pass after reopening"); res.Processed != 1 || res.Candidates != 1 || read != 2 {
		t.Fatalf("pass after reopening %+v reading %d entries, want 1 processed reading 2", res, read)
	}
	if e := f.entry(t, f.bobSB, third); *e.LearnStatus != LearnProcessed {
		t.Fatalf("run %s is %s", third, *e.LearnStatus)
	}

	// A deleted sandbox's waiting runs go with its history (the reaper's DropHistory): nothing is left to read.
	f.learnRun(t, f.bobSB, "skill:k4", "", cmds)
	if err := st.DropHistory(f.bobSB); err != nil {
		t.Fatal(err)
	}
	if left, err := st.PendingLearn(); err != nil || len(left) != 0 {
		t.Fatalf("waiting after the sandbox's history was dropped: %d %v", len(left), err)
	}
}

// TestLearnQueueSameAsScan: the pass through the learn queue learns the same runs in the same order, with the same
// results, as the pass reading every history (runs of one instant across sandboxes, a batch of one, several
// passes).
func TestLearnQueueSameAsScan(t *testing.T) {
	type step struct {
		owner    string // alice or bob: the run is in their fixture sandbox
		commands []string
		advance  bool // the clock moves on after this run
	}
	three := []string{"open a", "eval 1", "eval 2"}
	runs := []step{
		{"alice", three, false}, {"bob", three, false}, {"alice", []string{"open b", "eval 3", "eval 4"}, true},
		{"alice", []string{"get title"}, false}, {"bob", three, true}, {"bob", []string{"open c", "eval 5"}, true},
	}
	type outcome struct {
		results  []LearnResult
		statuses [][]string
		cands    int
	}
	play := func(scan bool) outcome {
		f := newSkillFixture(t)
		if scan {
			cfg := f.svc.cfg
			cfg.History = scanOnly{f.st}
			f.svc = New(cfg)
		}
		ctx := context.Background()
		sandboxOf := map[string]string{"alice": f.aliceSB, "bob": f.bobSB}
		var ids []string
		for i, r := range runs {
			tags := fmt.Sprintf("skill:k%d", i%2)
			run := BrowserRun{Batch: true, Commands: r.commands, Success: true, Elapsed: time.Second}
			for _, c := range r.commands {
				run.Steps = append(run.Steps, BrowserStep{Cmd: c})
			}
			ev := BrowserEvidence{Learn: true}
			ev.Tags = &tags
			id, _ := f.svc.RecordBrowser(ctx, sandboxOf[r.owner], run, ev)
			ids = append(ids, id)
			if r.advance {
				f.now = f.now.Add(time.Second)
			}
		}
		pol := DefaultLearnPolicy()
		pol.Batch = 1
		var out outcome
		for range len(runs) + 1 {
			res, err := f.svc.LearnBrowserRuns(ctx, pol)
			if err != nil {
				t.Fatal(err)
			}
			out.results = append(out.results, res)
			var st []string
			for i, id := range ids {
				st = append(st, *f.entry(t, sandboxOf[runs[i].owner], id).LearnStatus)
			}
			out.statuses = append(out.statuses, st)
		}
		out.cands = len(f.candidates(t, alice)) + len(f.candidates(t, bob))
		return out
	}
	queued, scanned := play(false), play(true)
	if !slices.Equal(queued.results, scanned.results) || queued.cands != scanned.cands {
		t.Fatalf("through the queue %+v (%d candidates), reading every history %+v (%d)", queued.results, queued.cands, scanned.results, scanned.cands)
	}
	for i := range queued.statuses {
		if !slices.Equal(queued.statuses[i], scanned.statuses[i]) {
			t.Fatalf("after pass %d: through the queue %v, reading every history %v", i+1, queued.statuses[i], scanned.statuses[i])
		}
	}
	if last := queued.statuses[len(queued.statuses)-1]; slices.Contains(last, LearnPending) {
		t.Fatalf("runs left pending after every pass: %v", last)
	}
}
