package service

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Browser learning (Bay's background pass): a browser run recorded with learn is "pending"; the pass reads its
// trace, cuts it into segments worth replaying (skills_learn_segments.go) and makes each a browser candidate
// (skill_type browser, created_by system:auto) with its payload {commands, steps, ...}, evaluates it automatically,
// and releases a passing one as an automatic canary of its skill key. The run is then "processed" ("skipped" with
// no segment, "error" when it could not be learned). A second part watches the automatic canaries: one whose health
// asks for it is rolled back, and one healthy over its whole window is promoted to stable.
//
// Ownership: a run is learned into the records of the owner of the sandbox that recorded it, read from the
// Manager's record, never from the entry or the trace; the trace is read through that sandbox only.
// Bounds: at most LearnPolicy.Batch runs a pass, and every record goes through the owner's quotas (a run past them
// is "error", with nothing of it kept). Exactly once: the records a run makes have ids derived from its execution
// id and are written in one transaction, so a pass that finds them (a restart after the records were written but
// before the run was marked, or two passes at once) only marks the run.
// Deduplication (Bay's): a segment whose commands hash (payload_hash) to those of a candidate of the same skill key
// makes no candidate; the run is still processed.

// LearnPolicy is how the pass learns (Bay's browser_learning settings; DefaultLearnPolicy has its defaults).
type LearnPolicy struct {
	Interval               time.Duration // between passes (a learn run also wakes the loop)
	Batch                  int           // runs learned per pass
	ScoreThreshold         float64       // a segment passes its evaluation with at least this score,
	ReplaySuccessThreshold float64       // this replay success
	MinSamples             int           // and this many samples
	CanaryWindow           time.Duration // an automatic canary's health window
	AutoRelease            bool          // release passing candidates as canaries, and healthy canaries as stable
}

// DefaultLearnPolicy is Bay's: every 5 minutes, 20 runs, score 0.85, replay 0.95, 30 samples (a segment of three
// steps or more passes), a 24 h canary window, automatic releases on.
func DefaultLearnPolicy() LearnPolicy {
	return LearnPolicy{Interval: 5 * time.Minute, Batch: 20, ScoreThreshold: 0.85, ReplaySuccessThreshold: 0.95,
		MinSamples: 30, CanaryWindow: 24 * time.Hour, AutoRelease: true}
}

// LearnResult counts what one pass did.
type LearnResult struct {
	Processed, Skipped, Errored, Candidates, PromotedCanary, PromotedStable, RolledBack int
}

// Learning statuses past pending (Bay's).
const (
	LearnProcessed = "processed"
	LearnError     = "error"
	learnBy        = "system:auto"
	learnBenchmark = "browser-replay-v1"
	learnNoSegment = "no_actionable_segments"
	maxAutoCanary  = 200 // automatic canaries examined a pass (Bay's)
)

// kickLearning wakes the learning loop (a learn run was recorded); a wake already pending absorbs it.
func (s *Service) kickLearning() {
	select {
	case s.learnKick <- struct{}{}:
	default:
	}
}

// RunBrowserLearning runs a pass at start, then every pol.Interval and whenever a learn run is recorded, until ctx
// ends. Passes never overlap within one Service; two Services over one store may run at once (exactly once holds).
func (s *Service) RunBrowserLearning(ctx context.Context, pol LearnPolicy) {
	if s.cfg.Skills == nil || s.cfg.History == nil {
		return
	}
	if pol.Interval <= 0 {
		pol.Interval = DefaultLearnPolicy().Interval
	}
	tick := time.NewTicker(pol.Interval)
	defer tick.Stop()
	for {
		started := time.Now()
		if res, err := s.LearnBrowserRuns(ctx, pol); err != nil {
			s.cfg.Logger.Warn("browser learning pass", "error", err)
		} else if res != (LearnResult{}) {
			s.cfg.Logger.Info("browser learning pass", "processed", res.Processed, "skipped", res.Skipped, "errored", res.Errored,
				"candidates", res.Candidates, "promoted_canary", res.PromotedCanary, "promoted_stable", res.PromotedStable,
				"rolled_back", res.RolledBack)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.learnKick:
			// A pass lists every sandbox and checks the automatic canaries, so a tenant recording learn runs back
			// to back wakes it at most once a learnMinGap: the runs wait for that pass, which takes them all (up to
			// the batch).
			gap := time.NewTimer(learnMinGap - time.Since(started))
			select {
			case <-ctx.Done():
				gap.Stop()
				return
			case <-gap.C:
			}
		}
	}
}

// learnMinGap is the least time between the starts of two passes a learn run wakes.
const learnMinGap = time.Second

// pendingRun is a run waiting to be learned, with the sandbox (and so the owner) that recorded it.
type pendingRun struct {
	sb    sandboxes.Sandbox
	entry *sandboxes.HistoryEntry
}

// LearnQueue is implemented by a HistoryStore that indexes the runs waiting to be learned (BoltStore does, in the
// history's own transactions: store_learn.go). With it a pass reads those runs only; without it, a pass reads every
// sandbox's whole history to find them.
type LearnQueue interface {
	// PendingLearn returns every stored entry for which AwaitsLearning holds, newest first within a sandbox, with
	// SandboxID set.
	PendingLearn() ([]*sandboxes.HistoryEntry, error)
	// UpdatePendingLearn edits one entry among a sandbox's entries waiting to be learned; false when it is not
	// waiting.
	UpdatePendingLearn(sandboxID, id string, fn func(*sandboxes.HistoryEntry)) (*sandboxes.HistoryEntry, bool, error)
}

// LearnBrowserRuns runs one pass: the oldest pol.Batch pending runs of every sandbox are learned (runs of one
// instant by owner, then sandbox), then the automatic canaries of the owners of those sandboxes are checked. An owner with no sandbox has no executions, so its
// canaries have no samples and would be neither rolled back nor promoted.
func (s *Service) LearnBrowserRuns(ctx context.Context, pol LearnPolicy) (LearnResult, error) {
	var res LearnResult
	if s.cfg.Skills == nil || s.cfg.History == nil {
		return res, nil
	}
	if pol.Batch <= 0 {
		pol.Batch = DefaultLearnPolicy().Batch
	}
	var boxes []*sandboxes.Sandbox
	owners := map[string]bool{}
	cursor := ""
	for {
		page, next, err := s.cfg.Sandboxes.List(ctx, sandboxes.ListOptions{Limit: 200, Cursor: cursor})
		if err != nil {
			return res, fmt.Errorf("listing sandboxes to learn from: %w", err)
		}
		for _, sb := range page {
			if sb.Owner != "" {
				owners[sb.Owner] = true
			}
		}
		boxes = append(boxes, page...)
		if next == "" || next == cursor {
			break
		}
		cursor = next
	}
	pending, err := s.pendingRuns(boxes)
	if err != nil {
		return res, err
	}
	// Oldest first; runs of one instant by owner, then sandbox, so that a pass takes the same runs in the same order
	// whatever order the sandboxes were listed in (their ids are random). Within a sandbox the stable sort keeps the
	// history's order.
	slices.SortStableFunc(pending, func(a, b pendingRun) int {
		return cmp.Or(a.entry.CreatedAt.Compare(b.entry.CreatedAt), strings.Compare(a.sb.Owner, b.sb.Owner), strings.Compare(a.sb.ID, b.sb.ID))
	})
	for _, run := range pending[:min(len(pending), pol.Batch)] {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		status, learnErr := s.learnRun(ctx, pol, run, &res)
		switch status {
		case LearnProcessed:
			res.Processed++
		case LearnSkipped:
			res.Skipped++
		default:
			res.Errored++
		}
		now := s.cfg.Now().UTC()
		if err := s.markLearned(run, func(e *sandboxes.HistoryEntry) {
			e.LearnStatus, e.LearnError, e.LearnProcessedAt = &status, learnErr, &now
		}); err != nil {
			return res, fmt.Errorf("marking %s learned: %w", run.entry.ID, err)
		}
	}
	ownerList := make([]string, 0, len(owners))
	for o := range owners {
		ownerList = append(ownerList, o)
	}
	slices.Sort(ownerList)
	return res, s.watchAutoCanaries(ctx, pol, ownerList, &res)
}

// markLearned writes run's learning mark: through the learn queue when the store has one (reading the runs still
// waiting, not the sandbox's whole history), else, or when the run is no longer waiting there (another pass marked
// it first), by its id over the whole history, as the mark was always written.
func (s *Service) markLearned(run pendingRun, fn func(*sandboxes.HistoryEntry)) error {
	if q, ok := s.cfg.History.(LearnQueue); ok {
		if _, found, err := q.UpdatePendingLearn(run.sb.ID, run.entry.ID, fn); err != nil || found {
			return err
		}
	}
	_, _, err := s.cfg.History.UpdateHistory(run.sb.ID, run.entry.ID, fn)
	return err
}

// pendingRuns are the runs of boxes waiting to be learned, in boxes' order and newest first within a sandbox (the
// pass then orders them oldest first, keeping this order among runs of one instant). Runs of a sandbox the Manager
// no longer lists are left for the history reaper.
func (s *Service) pendingRuns(boxes []*sandboxes.Sandbox) ([]pendingRun, error) {
	var pending []pendingRun
	if q, ok := s.cfg.History.(LearnQueue); ok {
		all, err := q.PendingLearn()
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, nil
		}
		bySandbox := map[string][]*sandboxes.HistoryEntry{}
		for _, e := range all {
			bySandbox[e.SandboxID] = append(bySandbox[e.SandboxID], e)
		}
		for _, sb := range boxes {
			for _, e := range bySandbox[sb.ID] {
				pending = append(pending, pendingRun{sb: *sb, entry: e})
			}
		}
		return pending, nil
	}
	for _, sb := range boxes {
		page, _, err := s.cfg.History.HistoryPage(sb.ID, (*sandboxes.HistoryEntry).AwaitsLearning,
			0, sandboxes.MaxHistoryEntries) // a sandbox keeps at most that many; the oldest are learned first
		if err != nil {
			return nil, fmt.Errorf("reading the history of %s: %w", sb.ID, err)
		}
		for _, e := range page {
			pending = append(pending, pendingRun{sb: *sb, entry: e})
		}
	}
	return pending, nil
}

// learnID is the id of the index-th record of prefix that run id makes: the same on every pass.
func learnID(prefix, execID string, index int) string {
	sum := sha256.Sum256([]byte("learn\x00" + prefix + "\x00" + execID + "\x00" + strconv.Itoa(index)))
	return prefix + hex.EncodeToString(sum[:6])
}

// learnReport is an automatic evaluation's report (Bay's JSON: the policy, then the metrics).
type learnReport struct {
	Policy struct {
		ScoreThreshold         float64 `json:"score_threshold"`
		ReplaySuccessThreshold float64 `json:"replay_success_threshold"`
		MinSamples             int     `json:"min_samples"`
	} `json:"policy"`
	learnMetrics
}

// learnRun learns one run into its sandbox owner's records; it answers the run's new status and error.
func (s *Service) learnRun(_ context.Context, pol LearnPolicy, run pendingRun, res *LearnResult) (string, *string) {
	fail := func(msg string) (string, *string) { return LearnError, &msg }
	owner, e := run.sb.Owner, run.entry
	if owner == "" {
		return fail("the sandbox has no owner; skills belong to an owner")
	}
	var trace []byte
	if e.PayloadRef != nil {
		b, ok, err := s.cfg.History.Trace(run.sb.ID, *e.PayloadRef)
		if err != nil {
			return fail("reading the trace: " + err.Error())
		}
		if !ok {
			return fail("Artifact blob not found: " + clip(strings.TrimPrefix(*e.PayloadRef, TraceRefPrefix)))
		}
		trace = b
	}
	segs := learnSegments(learnSteps(trace, e.Code, e.Success))
	if len(segs) == 0 {
		msg := learnNoSegment
		return LearnSkipped, &msg
	}
	key, scenario := learnSkillKey(e.Tags, run.sb.ID), learnScenarioKey(e.Description)
	var made LearnResult
	err := s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		made = LearnResult{}
		if b, err := tx.Get(sandboxes.SkillCandidates, learnID("sc-", e.ID, 0)); err != nil || b != nil {
			return err // learned by an earlier pass: only the mark is left to write
		}
		known, err := learnedHashes(tx, key)
		if err != nil {
			return err
		}
		by := learnBy
		for i, seg := range segs {
			commands := make([]string, len(seg))
			for j, st := range seg {
				commands[j] = st.Cmd
			}
			hash := commandsHash(commands)
			if known[hash] {
				continue // the skill key already has a candidate of these commands (Bay's dedup)
			}
			known[hash] = true
			payload, err := json.Marshal(map[string]any{"skill_type": SkillTypeBrowser, "segment_index": i,
				"source_execution_id": e.ID, "commands": commands, "steps": seg})
			if err != nil {
				return err
			}
			if len(payload) > MaxSkillPayload {
				return Errorf(CodePayloadTooLarge, "a skill payload is at most %d bytes of JSON", MaxSkillPayload)
			}
			now := s.cfg.Now().UTC()
			blob := &SkillPayload{ID: learnID("blob-", e.ID, i), Kind: "browser_segment", Payload: payload, CreatedAt: now}
			if err := skillPut(tx, sandboxes.SkillPayloads, blob.ID, blob, s.cfg.MaxSkillRecords); err != nil {
				return err
			}
			ref := blob.Ref()
			m := scoreSegment(seg)
			passed := m.Score >= pol.ScoreThreshold && m.ReplaySuccess >= pol.ReplaySuccessThreshold && m.Samples >= pol.MinSamples
			reason := "threshold_not_met"
			switch {
			case passed && pol.AutoRelease:
				reason = "threshold_passed"
			case passed:
				reason = "auto_release_disabled"
			}
			status := SkillRejected
			if passed {
				status = SkillEvaluating
			}
			score := m.Score
			c := &SkillCandidate{ID: learnID("sc-", e.ID, i), SkillKey: key, ScenarioKey: scenario, PayloadRef: &ref, PayloadHash: &hash,
				SkillType: SkillTypeBrowser, AutoReleaseEligible: passed && pol.AutoRelease, AutoReleaseReason: &reason,
				SourceExecutionIDs: []string{e.ID}, Status: status, LatestScore: &score, LatestPass: &passed,
				LastEvaluatedAt: &now, CreatedBy: &by, CreatedAt: now, UpdatedAt: now}
			if err := skillPut(tx, sandboxes.SkillCandidates, c.ID, c, s.cfg.MaxSkillRecords); err != nil {
				return err
			}
			made.Candidates++
			var rep learnReport
			rep.Policy.ScoreThreshold, rep.Policy.ReplaySuccessThreshold, rep.Policy.MinSamples = pol.ScoreThreshold, pol.ReplaySuccessThreshold, pol.MinSamples
			rep.learnMetrics = m
			rb, err := json.Marshal(rep)
			if err != nil {
				return err
			}
			report, bench := string(rb), learnBenchmark
			ev := &SkillEvaluation{ID: learnID("se-", e.ID, i), CandidateID: c.ID, BenchmarkID: &bench, Score: &score,
				Passed: passed, Report: &report, EvaluatedBy: &by, CreatedAt: now}
			if err := skillPut(tx, sandboxes.SkillEvaluations, ev.ID, ev, s.cfg.MaxSkillRecords); err != nil {
				return err
			}
			if !passed || !pol.AutoRelease {
				continue
			}
			end := now.Add(pol.CanaryWindow)
			rel := &SkillRelease{ID: learnID("sr-", e.ID, i), Stage: StageCanary, ReleaseMode: ReleaseAuto, PromotedBy: &by,
				HealthWindowEndAt: &end}
			if active, err := activeRelease(tx, key); err != nil {
				return err
			} else if active != nil {
				rel.AutoPromotedFrom = &active.ID
			}
			if err := s.releaseCandidate(tx, c, rel); err != nil {
				return err
			}
			made.PromotedCanary++
		}
		return nil
	})
	if err != nil {
		return fail(AsError(skillWrap(err, "learning a browser run")).Message)
	}
	res.Candidates += made.Candidates
	res.PromotedCanary += made.PromotedCanary
	return LearnProcessed, nil
}

// commandsHash is a segment's payload hash: hex SHA-256 of its commands in order, as a JSON array.
func commandsHash(commands []string) string {
	b, _ := json.Marshal(commands) // strings always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// learnedHashes are the payload hashes of key's candidates (deleted ones included, as Bay counts every row).
func learnedHashes(tx sandboxes.SkillTx, key string) (map[string]bool, error) {
	all, err := skillAll[SkillCandidate](tx, sandboxes.SkillCandidates)
	known := map[string]bool{}
	for _, c := range all {
		if c.SkillKey == key && c.PayloadHash != nil {
			known[*c.PayloadHash] = true
		}
	}
	return known, err
}

// activeRelease is key's active release, nil when none.
func activeRelease(tx sandboxes.SkillTx, key string) (*SkillRelease, error) {
	all, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
	if err != nil {
		return nil, err
	}
	var active *SkillRelease
	for _, r := range all {
		if r.SkillKey == key && r.IsActive && !r.IsDeleted && (active == nil || r.Version > active.Version) {
			active = r
		}
	}
	return active, nil
}

// watchAutoCanaries checks the active automatic canaries of owners (at most maxAutoCanary, oldest first): one whose
// health asks for a rollback is rolled back (automatically), and, with automatic releases on, one healthy over its
// whole window is released again as stable.
func (s *Service) watchAutoCanaries(ctx context.Context, pol LearnPolicy, owners []string, res *LearnResult) error {
	type canary struct {
		owner string
		rel   *SkillRelease
	}
	var canaries []canary
	for _, owner := range owners {
		err := s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
			all, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
			for _, r := range all {
				if r.IsActive && !r.IsDeleted && r.Stage == StageCanary && r.ReleaseMode == ReleaseAuto {
					canaries = append(canaries, canary{owner, r})
				}
			}
			return err
		})
		if err != nil {
			return skillWrap(err, "listing automatic canaries")
		}
	}
	slices.SortStableFunc(canaries, func(a, b canary) int { return a.rel.PromotedAt.Compare(b.rel.PromotedAt) })
	for _, c := range canaries[:min(len(canaries), maxAutoCanary)] {
		p := Principal{Owner: c.owner}
		h, err := s.SkillReleaseHealth(ctx, p, c.rel.ID)
		if err != nil {
			s.cfg.Logger.Warn("browser learning: canary health", "release", c.rel.ID, "error", err)
			continue
		}
		switch {
		case h.ShouldRollback:
			done := false
			err = s.updateSkills(c.owner, func(tx sandboxes.SkillTx) error {
				if cur, err := getRelease(tx, c.rel.ID); err != nil || !cur.IsActive {
					return err // changed since it was read: the next pass sees it as it is
				}
				_, err := s.rollbackRelease(tx, c.rel.ID, ReleaseAuto, learnBy)
				done = err == nil
				return err
			})
			if done {
				res.RolledBack++
			}
		case pol.AutoRelease && h.WindowComplete && h.Healthy:
			done := false
			err = s.updateSkills(c.owner, func(tx sandboxes.SkillTx) error {
				cand, err := getCandidate(tx, c.rel.CandidateID)
				if err != nil {
					return err
				}
				if cur, err := getRelease(tx, c.rel.ID); err != nil || !cur.IsActive {
					return err // changed since it was read: the next pass sees it as it is
				}
				by, from := learnBy, c.rel.ID
				err = s.releaseCandidate(tx, cand, &SkillRelease{ID: learnID("sr-", c.rel.ID, -1), Stage: StageStable,
					ReleaseMode: ReleaseAuto, PromotedBy: &by, AutoPromotedFrom: &from})
				done = err == nil
				return err
			})
			if done {
				res.PromotedStable++
			}
		}
		if err != nil {
			s.cfg.Logger.Warn("browser learning: automatic canary", "release", c.rel.ID, "error", err)
		}
	}
	return nil
}
