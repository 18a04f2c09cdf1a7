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

// Release health: a release's executions (tagged release:<id>) over its window, against the version before it.

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
