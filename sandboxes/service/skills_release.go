package service

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Releases: a promotion makes the next version of its skill key the only active one; a rollback makes a new
// version from the release before the rolled-back one; health compares a release's tagged executions with the
// version before it.

// SkillRelease is one version of a skill, Bay's shape.
type SkillRelease struct {
	ID                 string     `json:"id"`
	SkillKey           string     `json:"skill_key"`
	CandidateID        string     `json:"candidate_id"`
	Version            int        `json:"version"`
	Stage              string     `json:"stage"`
	IsActive           bool       `json:"is_active"`
	ReleaseMode        string     `json:"release_mode"`
	PromotedBy         *string    `json:"promoted_by"`
	PromotedAt         time.Time  `json:"promoted_at"`
	RollbackOf         *string    `json:"rollback_of"`
	AutoPromotedFrom   *string    `json:"auto_promoted_from"`
	HealthWindowEndAt  *time.Time `json:"health_window_end_at"`
	UpgradeOfReleaseID *string    `json:"upgrade_of_release_id"`
	UpgradeReason      *string    `json:"upgrade_reason"`
	ChangeSummary      *string    `json:"change_summary"`
	SkillDeletion
}

// SkillPromotion is how a candidate is promoted.
type SkillPromotion struct {
	Stage              string // "" is canary
	UpgradeOfReleaseID *string
	UpgradeReason      *string
	ChangeSummary      *string
}

// SkillHealth is a release's health over its window, Bay's shape.
type SkillHealth struct {
	ReleaseID           string             `json:"release_id"`
	SkillKey            string             `json:"skill_key"`
	Stage               string             `json:"stage"`
	WindowStartAt       time.Time          `json:"window_start_at"`
	WindowEndAt         time.Time          `json:"window_end_at"`
	WindowComplete      bool               `json:"window_complete"`
	Samples             int                `json:"samples"`
	SuccessRate         float64            `json:"success_rate"`
	ErrorRate           float64            `json:"error_rate"`
	P95Duration         int64              `json:"p95_duration"`
	BaselineSuccessRate float64            `json:"baseline_success_rate"`
	BaselineErrorRate   float64            `json:"baseline_error_rate"`
	BaselineSamples     int                `json:"baseline_samples"`
	SuccessDrop         float64            `json:"success_drop"`
	ErrorRateMultiplier float64            `json:"error_rate_multiplier"`
	Healthy             bool               `json:"healthy"`
	ShouldRollback      bool               `json:"should_rollback"`
	RollbackReasons     []string           `json:"rollback_reasons"`
	Thresholds          map[string]float64 `json:"thresholds"`
}

// The rollback policy's thresholds (Bay's defaults): a success rate more than 3 points under the baseline, or an
// error rate more than twice the baseline's.
const (
	skillSuccessDropThreshold = 0.03
	skillErrorMultThreshold   = 2.0
)

func getRelease(tx sandboxes.SkillTx, id string) (*SkillRelease, error) {
	r := new(SkillRelease)
	found, err := skillGet(tx, sandboxes.SkillReleases, id, r)
	if err != nil {
		return nil, err
	}
	if !found || r.IsDeleted {
		return nil, Errorf(CodeNotFound, "Skill release not found: %s", id)
	}
	return r, nil
}

// nextVersion deactivates key's active releases and returns the version after the highest ever given (deleted
// releases included, so a version is never reused).
func nextVersion(tx sandboxes.SkillTx, releases []*SkillRelease, key string) (int, error) {
	v := 0
	for _, r := range releases {
		if r.SkillKey != key {
			continue
		}
		v = max(v, r.Version)
		if r.IsActive && !r.IsDeleted {
			r.IsActive = false
			if err := skillPut(tx, sandboxes.SkillReleases, r.ID, r, 0); err != nil {
				return 0, err
			}
		}
	}
	return v + 1, nil
}

// PromoteSkillCandidate releases a candidate whose latest evaluation passed as its skill's next version.
func (s *Service) PromoteSkillCandidate(_ context.Context, p Principal, id string, req SkillPromotion) (*SkillRelease, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	if req.Stage == "" {
		req.Stage = StageCanary
	}
	if !slices.Contains(SkillStages, req.Stage) {
		return nil, Errorf(CodeValidation, "Invalid release stage: %s", req.Stage)
	}
	for _, c := range []struct {
		name string
		v    *string
		max  int
	}{{"upgrade_of_release_id", req.UpgradeOfReleaseID, MaxSkillKey}, {"upgrade_reason", req.UpgradeReason, MaxSkillText},
		{"change_summary", req.ChangeSummary, MaxSkillText}} {
		if err := checkText(c.name, c.v, c.max); err != nil {
			return nil, err
		}
	}
	var rel *SkillRelease
	err = s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		c, err := getCandidate(tx, id)
		if err != nil {
			return err
		}
		if c.LatestPass == nil || !*c.LatestPass {
			return Errorf(CodeConflict, "Candidate has no passing evaluation; promotion is blocked").With("candidate_id", id)
		}
		releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		version, err := nextVersion(tx, releases, c.SkillKey)
		if err != nil {
			return err
		}
		now := s.cfg.Now().UTC()
		rel = &SkillRelease{ID: NewID("sr-"), SkillKey: c.SkillKey, CandidateID: c.ID, Version: version, Stage: req.Stage,
			IsActive: true, ReleaseMode: "manual", PromotedBy: &owner, PromotedAt: now,
			UpgradeOfReleaseID: req.UpgradeOfReleaseID, UpgradeReason: req.UpgradeReason, ChangeSummary: req.ChangeSummary}
		if err := skillPut(tx, sandboxes.SkillReleases, rel.ID, rel, s.cfg.MaxSkillRecords); err != nil {
			return err
		}
		c.Status, c.PromotionReleaseID, c.UpdatedAt = SkillPromoted, &rel.ID, now
		return skillPut(tx, sandboxes.SkillCandidates, c.ID, c, 0)
	})
	if err != nil {
		return nil, skillWrap(err, "promoting a skill candidate")
	}
	return rel, nil
}

// SkillReleases lists p's releases, newest promotion first, filtered by q.SkillKey, q.Stage and q.ActiveOnly.
func (s *Service) SkillReleases(_ context.Context, p Principal, q SkillQuery) ([]*SkillRelease, int, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, 0, err
	}
	if q.Stage != "" && !slices.Contains(SkillStages, q.Stage) {
		return nil, 0, Errorf(CodeValidation, "Invalid release stage: %s", q.Stage)
	}
	var all []*SkillRelease
	err = s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		all, err = skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		return err
	})
	if err != nil {
		return nil, 0, skillWrap(err, "listing skill releases")
	}
	all = slices.DeleteFunc(all, func(r *SkillRelease) bool {
		return r.IsDeleted || (q.SkillKey != "" && r.SkillKey != q.SkillKey) || (q.Stage != "" && r.Stage != q.Stage) ||
			(q.ActiveOnly && !r.IsActive)
	})
	slices.SortStableFunc(all, func(a, b *SkillRelease) int {
		if c := b.PromotedAt.Compare(a.PromotedAt); c != 0 {
			return c
		}
		return b.Version - a.Version
	})
	return page(all, q.Limit, q.Offset)
}

// ActiveSkillReleases are owner's active releases with their candidates, one per skill key, by key.
func (s *Service) ActiveSkillReleases(_ context.Context, owner string) ([]*SkillRelease, map[string]*SkillCandidate, error) {
	if s.cfg.Skills == nil || owner == "" {
		return nil, nil, nil
	}
	var active []*SkillRelease
	cands := map[string]*SkillCandidate{}
	err := s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		all, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		for _, r := range all {
			if !r.IsActive || r.IsDeleted {
				continue
			}
			c := new(SkillCandidate)
			if found, err := skillGet(tx, sandboxes.SkillCandidates, r.CandidateID, c); err != nil {
				return err
			} else if found {
				cands[r.CandidateID] = c
			}
			active = append(active, r)
		}
		return nil
	})
	slices.SortFunc(active, func(a, b *SkillRelease) int { return strings.Compare(a.SkillKey, b.SkillKey) })
	return active, cands, skillWrap(err, "reading active skill releases")
}

// RollbackSkillRelease makes a new version of the release before id (same candidate and stage), active, and marks
// id's candidate rolled back. With no release before it the rollback is a conflict.
func (s *Service) RollbackSkillRelease(_ context.Context, p Principal, id string) (*SkillRelease, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	var rel *SkillRelease
	err = s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		cur, err := getRelease(tx, id)
		if err != nil {
			return err
		}
		releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		var prev *SkillRelease
		for _, r := range releases {
			if r.SkillKey == cur.SkillKey && r.Version < cur.Version && !r.IsDeleted && (prev == nil || r.Version > prev.Version) {
				prev = r
			}
		}
		if prev == nil {
			return Errorf(CodeConflict, "Rollback is unavailable: no previous release exists").With("release_id", id)
		}
		version, err := nextVersion(tx, releases, cur.SkillKey)
		if err != nil {
			return err
		}
		now := s.cfg.Now().UTC()
		rel = &SkillRelease{ID: NewID("sr-"), SkillKey: cur.SkillKey, CandidateID: prev.CandidateID, Version: version,
			Stage: prev.Stage, IsActive: true, ReleaseMode: "manual", PromotedBy: &owner, PromotedAt: now, RollbackOf: &cur.ID}
		if err := skillPut(tx, sandboxes.SkillReleases, rel.ID, rel, s.cfg.MaxSkillRecords); err != nil {
			return err
		}
		c := new(SkillCandidate)
		if found, err := skillGet(tx, sandboxes.SkillCandidates, cur.CandidateID, c); err != nil {
			return err
		} else if found && !c.IsDeleted {
			c.Status, c.UpdatedAt = SkillRolledBack, now
			return skillPut(tx, sandboxes.SkillCandidates, c.ID, c, 0)
		}
		return nil
	})
	if err != nil {
		return nil, skillWrap(err, "rolling back a skill release")
	}
	return rel, nil
}

// DeleteSkillRelease soft-deletes a release (an active one too: it stops being active) and clears the promotion
// pointer of the candidate that names it.
func (s *Service) DeleteSkillRelease(_ context.Context, p Principal, id string, reason *string) (*SkillDeletion, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	if err := checkText("reason", reason, MaxSkillText); err != nil {
		return nil, err
	}
	var del SkillDeletion
	err = s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		r, err := getRelease(tx, id)
		if err != nil {
			return err
		}
		now := s.cfg.Now().UTC()
		r.IsActive = false
		r.SkillDeletion = SkillDeletion{IsDeleted: true, DeletedAt: &now, DeletedBy: &owner, DeleteReason: reason}
		del = r.SkillDeletion
		if err := skillPut(tx, sandboxes.SkillReleases, r.ID, r, 0); err != nil {
			return err
		}
		cands, err := skillAll[SkillCandidate](tx, sandboxes.SkillCandidates)
		if err != nil {
			return err
		}
		for _, c := range cands {
			if c.PromotionReleaseID != nil && *c.PromotionReleaseID == id {
				c.PromotionReleaseID, c.UpdatedAt = nil, now
				if err := skillPut(tx, sandboxes.SkillCandidates, c.ID, c, 0); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, skillWrap(err, "deleting a skill release")
	}
	return &del, nil
}

// skillMetrics aggregates executions: samples, success and error rates, and the 95th percentile duration.
type skillMetrics struct {
	samples                int
	successRate, errorRate float64
	p95                    int64
}

func aggregateSkillMetrics(durations []int64, successes int) skillMetrics {
	n := len(durations)
	if n == 0 {
		return skillMetrics{}
	}
	slices.Sort(durations)
	idx := max(0, int(math.Ceil(0.95*float64(n)))-1)
	sr := float64(successes) / float64(n)
	return skillMetrics{samples: n, successRate: sr, errorRate: 1 - sr, p95: durations[idx]}
}

// releaseTag is the tag an execution carries to count toward a release's health.
func releaseTag(id string) string { return "release:" + id }

func hasTag(tags *string, want string) bool {
	if tags == nil {
		return false
	}
	for _, t := range strings.Split(*tags, ",") {
		if strings.TrimSpace(t) == want {
			return true
		}
	}
	return false
}

// releaseMetrics measures the executions of owner's sandboxes tagged with release id in [from, to].
func (s *Service) releaseMetrics(ctx context.Context, owner, id string, from, to time.Time) (skillMetrics, error) {
	var durations []int64
	successes := 0
	tag := releaseTag(id)
	err := s.eachOwnerExecution(ctx, owner, func(e *sandboxes.HistoryEntry) {
		if e.CreatedAt.Before(from) || e.CreatedAt.After(to) || !hasTag(e.Tags, tag) {
			return
		}
		durations = append(durations, max(0, e.ExecutionTimeMS))
		if e.Success {
			successes++
		}
	})
	return aggregateSkillMetrics(durations, successes), err
}

// baselineFromReport reads an evaluation report's replay figures (Bay's JSON report: replay_success, error_rate,
// samples, p95_duration); anything else is the neutral baseline.
func baselineFromReport(report *string) skillMetrics {
	neutral := skillMetrics{successRate: 1}
	if report == nil {
		return neutral
	}
	var r struct {
		ReplaySuccess *float64 `json:"replay_success"`
		ErrorRate     *float64 `json:"error_rate"`
		Samples       int      `json:"samples"`
		P95           int64    `json:"p95_duration"`
	}
	if json.Unmarshal([]byte(*report), &r) != nil {
		return neutral
	}
	clamp := func(f float64) float64 {
		if math.IsNaN(f) {
			return 0
		}
		return min(max(f, 0), 1)
	}
	m := skillMetrics{samples: max(0, r.Samples), successRate: 1, p95: max(0, r.P95)}
	if r.ReplaySuccess != nil {
		m.successRate = clamp(*r.ReplaySuccess)
	}
	m.errorRate = 1 - m.successRate
	if r.ErrorRate != nil {
		m.errorRate = clamp(*r.ErrorRate)
	}
	return m
}

// SkillReleaseHealth measures a release over its window (24 h from its promotion) against the version before it:
// its own tagged executions then, else its candidate's latest evaluation report.
func (s *Service) SkillReleaseHealth(ctx context.Context, p Principal, id string) (*SkillHealth, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	var rel, prev *SkillRelease
	var prevEval *SkillEvaluation
	err = s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		if rel, err = getRelease(tx, id); err != nil {
			return err
		}
		releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		for _, r := range releases {
			if r.SkillKey == rel.SkillKey && r.Version < rel.Version && (prev == nil || r.Version > prev.Version) {
				prev = r
			}
		}
		if prev == nil {
			return nil
		}
		evals, err := skillAll[SkillEvaluation](tx, sandboxes.SkillEvaluations)
		for _, e := range evals {
			if e.CandidateID == prev.CandidateID && (prevEval == nil || e.CreatedAt.After(prevEval.CreatedAt)) {
				prevEval = e
			}
		}
		return err
	})
	if err != nil {
		return nil, skillWrap(err, "reading a skill release")
	}
	now := s.cfg.Now().UTC()
	end := rel.PromotedAt.Add(skillHealthDuration)
	if rel.HealthWindowEndAt != nil {
		end = *rel.HealthWindowEndAt
	}
	observed, err := s.releaseMetrics(ctx, owner, rel.ID, rel.PromotedAt, minTime(now, end))
	if err != nil {
		return nil, err
	}
	baseline := skillMetrics{successRate: 1}
	if prev != nil {
		if baseline, err = s.releaseMetrics(ctx, owner, prev.ID, prev.PromotedAt, rel.PromotedAt); err != nil {
			return nil, err
		}
		if baseline.samples == 0 {
			var report *string
			if prevEval != nil {
				report = prevEval.Report
			}
			baseline = baselineFromReport(report)
		}
	}
	h := &SkillHealth{ReleaseID: rel.ID, SkillKey: rel.SkillKey, Stage: rel.Stage, WindowStartAt: rel.PromotedAt,
		WindowEndAt: end, WindowComplete: !now.Before(end), Samples: observed.samples, SuccessRate: observed.successRate,
		ErrorRate: observed.errorRate, P95Duration: observed.p95, BaselineSuccessRate: baseline.successRate,
		BaselineErrorRate: baseline.errorRate, BaselineSamples: baseline.samples,
		SuccessDrop: baseline.successRate - observed.successRate, RollbackReasons: []string{},
		Thresholds: map[string]float64{"success_drop": skillSuccessDropThreshold, "error_rate_multiplier": skillErrorMultThreshold}}
	switch {
	case baseline.errorRate > 0:
		h.ErrorRateMultiplier = observed.errorRate / baseline.errorRate
	case observed.errorRate > 0:
		h.ErrorRateMultiplier = 1e6 // Bay's stand-in for "infinitely worse" (JSON has no infinity)
	default:
		h.ErrorRateMultiplier = 1
	}
	if observed.samples > 0 {
		if h.SuccessDrop > skillSuccessDropThreshold {
			h.RollbackReasons = append(h.RollbackReasons, "success_rate_drop")
		}
		if h.ErrorRateMultiplier > skillErrorMultThreshold {
			h.RollbackReasons = append(h.RollbackReasons, "error_rate_regression")
		}
	}
	h.ShouldRollback = len(h.RollbackReasons) > 0
	h.Healthy = observed.samples > 0 && !h.ShouldRollback
	return h, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// MaxSkillCommands bounds the commands of one browser skill replay.
const MaxSkillCommands = 1000

// BrowserSkill is the active release of key and the browser commands its candidate's payload holds (Bay's
// POST S/browser/skills/{key}/run replays them): the payload must be a stored blob: object with a non-empty
// "commands" array.
func (s *Service) BrowserSkill(_ context.Context, p Principal, key string) (*SkillRelease, []string, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, nil, err
	}
	var rel *SkillRelease
	var cand *SkillCandidate
	var blob *SkillPayload
	var refErr error
	err = s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		for _, r := range releases {
			if r.SkillKey == key && r.IsActive && !r.IsDeleted && (rel == nil || r.Version > rel.Version) {
				rel = r
			}
		}
		if rel == nil {
			return Errorf(CodeNotFound, "No active release found for skill_key: %s", key)
		}
		if cand, err = getCandidate(tx, rel.CandidateID); err != nil {
			return err
		}
		if cand.PayloadRef == nil {
			return nil
		}
		id, err := ParseSkillPayloadRef(*cand.PayloadRef)
		if err != nil {
			refErr = err
			return nil
		}
		blob = new(SkillPayload)
		found, err := skillGet(tx, sandboxes.SkillPayloads, id, blob)
		if err == nil && !found {
			err = Errorf(CodeNotFound, "Artifact blob not found: %s", id)
		}
		return err
	})
	if err != nil {
		return nil, nil, skillWrap(err, "reading a browser skill")
	}
	if refErr != nil {
		return nil, nil, refErr
	}
	if blob == nil {
		return nil, nil, Errorf(CodeValidation, "Candidate payload must be a JSON object")
	}
	var payload map[string]any
	if json.Unmarshal(blob.Payload, &payload) != nil || payload == nil {
		return nil, nil, Errorf(CodeValidation, "Candidate payload must be a JSON object")
	}
	raw, ok := payload["commands"].([]any)
	if !ok {
		return nil, nil, Errorf(CodeValidation, "Candidate payload missing 'commands' array")
	}
	var commands []string
	for _, c := range raw {
		var cmd string
		switch v := c.(type) {
		case string:
			cmd = v
		default:
			b, _ := json.Marshal(v)
			cmd = string(b)
		}
		if strings.TrimSpace(cmd) != "" {
			commands = append(commands, cmd)
		}
	}
	switch {
	case len(commands) == 0:
		return nil, nil, Errorf(CodeValidation, "Candidate payload commands must not be empty")
	case len(commands) > MaxSkillCommands:
		return nil, nil, Errorf(CodeValidation, "a browser skill runs at most %d commands", MaxSkillCommands)
	}
	return rel, commands, nil
}

// MergeSkillTags joins comma-separated tag lists into one, trimmed, unique and sorted (Bay's merge of a replay's
// tags with skill:<key>, release:<id> and stage:<stage>); "" when there are none.
func MergeSkillTags(lists ...string) string {
	var tags []string
	for _, l := range lists {
		for _, t := range strings.Split(l, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	}
	slices.Sort(tags)
	return strings.Join(slices.Compact(tags), ",")
}
