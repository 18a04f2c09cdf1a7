package service

import (
	"context"
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

// getRelease reads a release that is not deleted.
func getRelease(tx sandboxes.SkillTx, id string) (*SkillRelease, error) {
	return skillGetLive[SkillRelease](tx, sandboxes.SkillReleases, id, "Skill release")
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
		rel = &SkillRelease{ID: NewID("sr-"), Stage: req.Stage, ReleaseMode: ReleaseManual, PromotedBy: &owner,
			UpgradeOfReleaseID: req.UpgradeOfReleaseID, UpgradeReason: req.UpgradeReason, ChangeSummary: req.ChangeSummary}
		return s.releaseCandidate(tx, c, rel)
	})
	if err != nil {
		return nil, skillWrap(err, "promoting a skill candidate")
	}
	return rel, nil
}

// Release modes (Bay's): a caller's promotion or rollback is manual; the browser learning pass's is auto.
const (
	ReleaseManual = "manual"
	ReleaseAuto   = "auto"
)

// releaseCandidate stores rel (its ID, Stage, ReleaseMode, PromotedBy and optional fields set) as the next version of
// c's skill key, the only active one, and marks c promoted by it: promoted_canary or promoted_stable for a browser
// candidate released automatically, else promoted (Bay's statuses).
func (s *Service) releaseCandidate(tx sandboxes.SkillTx, c *SkillCandidate, rel *SkillRelease) error {
	releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
	if err != nil {
		return err
	}
	version, err := nextVersion(tx, releases, c.SkillKey)
	if err != nil {
		return err
	}
	now := s.cfg.Now().UTC()
	rel.SkillKey, rel.CandidateID, rel.Version, rel.IsActive, rel.PromotedAt = c.SkillKey, c.ID, version, true, now
	if err := skillPut(tx, sandboxes.SkillReleases, rel.ID, rel, s.cfg.MaxSkillRecords); err != nil {
		return err
	}
	c.Status = SkillPromoted
	if c.SkillType == SkillTypeBrowser && rel.ReleaseMode == ReleaseAuto {
		c.Status = "promoted_" + rel.Stage
	}
	c.PromotionReleaseID, c.UpdatedAt = &rel.ID, now
	return skillPut(tx, sandboxes.SkillCandidates, c.ID, c, 0)
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
	return listSkills(s, owner, sandboxes.SkillReleases, q, func(r *SkillRelease) bool {
		return r.IsDeleted || (q.SkillKey != "" && r.SkillKey != q.SkillKey) || (q.Stage != "" && r.Stage != q.Stage) ||
			(q.ActiveOnly && !r.IsActive)
	}, func(a, b *SkillRelease) int {
		if c := b.PromotedAt.Compare(a.PromotedAt); c != 0 {
			return c
		}
		return b.Version - a.Version
	})
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
		rel, err = s.rollbackRelease(tx, id, ReleaseManual, owner)
		return err
	})
	if err != nil {
		return nil, skillWrap(err, "rolling back a skill release")
	}
	return rel, nil
}

// rollbackRelease makes the new release that rolls id back (mode and by are who did it; an automatic rollback names
// the release it replaced in auto_promoted_from, as Bay's does).
func (s *Service) rollbackRelease(tx sandboxes.SkillTx, id, mode, by string) (*SkillRelease, error) {
	var rel *SkillRelease
	err := func() error {
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
			Stage: prev.Stage, IsActive: true, ReleaseMode: mode, PromotedBy: &by, PromotedAt: now, RollbackOf: &cur.ID}
		if mode == ReleaseAuto {
			rel.AutoPromotedFrom = &cur.ID
		}
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
	}()
	return rel, err
}

// DeleteSkillRelease soft-deletes a release (an active one too: it stops being active) and clears the promotion
// pointer of the candidate that names it.
func (s *Service) DeleteSkillRelease(_ context.Context, p Principal, id string, reason *string) (*SkillDeletion, error) {
	return s.softDeleteSkill(p, reason, "deleting a skill release", func(tx sandboxes.SkillTx, del SkillDeletion) error {
		r, err := getRelease(tx, id)
		if err != nil {
			return err
		}
		now := *del.DeletedAt
		r.IsActive = false
		r.SkillDeletion = del
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
}
