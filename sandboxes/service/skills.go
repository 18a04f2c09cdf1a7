package service

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// The skills self-update lifecycle (Bay's /v1/skills): executions that worked become a candidate, the candidate is
// evaluated, a passing one is promoted to a versioned release (canary or stable), a release can be rolled back to
// the one before it, and a release's health is measured from the executions tagged with it. Every record is its
// owner's: the store's transaction is bound to p.Owner, and an execution counts as evidence only when it is in the
// history of a sandbox p.Owner owns. Bay's semantics are kept (statuses, versions, errors); the limits below are
// ours, because the records are tenant input kept in the gateway's own file.

// Candidate statuses and release stages, Bay's names.
const (
	SkillDraft      = "draft"
	SkillEvaluating = "evaluating"
	SkillPromoted   = "promoted"
	SkillRejected   = "rejected"
	SkillRolledBack = "rolled_back"
	StageCanary     = "canary"
	StageStable     = "stable"
	// Skill types: a candidate made by a caller is code; one the browser learning pass makes is browser.
	SkillTypeCode    = "code"
	SkillTypeBrowser = "browser"
)

// SkillStatuses are the candidate statuses a list may filter on (Bay's enum, its auto-release ones included).
var SkillStatuses = []string{SkillDraft, SkillEvaluating, SkillPromoted, "promoted_canary", "promoted_stable", SkillRejected, SkillRolledBack}

// SkillStages are the release stages.
var SkillStages = []string{StageCanary, StageStable}

// Limits on what one owner keeps (the store's file is shared by every tenant).
const (
	DefaultMaxSkillRecords = 10000   // of each kind, per owner (Config.MaxSkillRecords)
	MaxSkillPayload        = 1 << 20 // bytes of one payload's JSON
	MaxSkillText           = 64 << 10
	MaxSkillKey            = 256
	MaxSkillSources        = 100 // source executions of one candidate
	MaxSkillPageLimit      = 500
	DefaultSkillPage       = 100
	skillBlobRefPrefix     = "blob:"
	skillHealthDuration    = 24 * time.Hour
)

// SkillPayload is a stored JSON document (Bay's artifact blob), named by its ref "blob:<id>".
type SkillPayload struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
}

// Ref is the payload's reference, as candidates and Bay's API name it.
func (b *SkillPayload) Ref() string { return skillBlobRefPrefix + b.ID }

// SkillCandidate is a skill proposed from executions, Bay's shape.
type SkillCandidate struct {
	ID          string  `json:"id"`
	SkillKey    string  `json:"skill_key"`
	ScenarioKey *string `json:"scenario_key"`
	PayloadRef  *string `json:"payload_ref"`
	// PayloadHash names a learned candidate's commands (skills_learn.go): a run whose segment has the hash of one
	// of its skill key's candidates makes no new one. null for a caller's candidate.
	PayloadHash         *string        `json:"payload_hash"`
	SkillType           string         `json:"skill_type"`
	AutoReleaseEligible bool           `json:"auto_release_eligible"`
	AutoReleaseReason   *string        `json:"auto_release_reason"`
	Summary             *string        `json:"summary"`
	UsageNotes          *string        `json:"usage_notes"`
	Preconditions       map[string]any `json:"preconditions"`
	Postconditions      map[string]any `json:"postconditions"`
	SourceExecutionIDs  []string       `json:"source_execution_ids"`
	Status              string         `json:"status"`
	LatestScore         *float64       `json:"latest_score"`
	LatestPass          *bool          `json:"latest_pass"`
	LastEvaluatedAt     *time.Time     `json:"last_evaluated_at"`
	PromotionReleaseID  *string        `json:"promotion_release_id"`
	CreatedBy           *string        `json:"created_by"`
	CreatedAt           time.Time      `json:"created_at"`
	UpdatedAt           time.Time      `json:"updated_at"`
	SkillDeletion
}

// SkillDeletion is the soft-delete state of a candidate or release.
type SkillDeletion struct {
	IsDeleted    bool       `json:"is_deleted"`
	DeletedAt    *time.Time `json:"deleted_at"`
	DeletedBy    *string    `json:"deleted_by"`
	DeleteReason *string    `json:"delete_reason"`
}

// SkillEvaluation is one evaluation of a candidate.
type SkillEvaluation struct {
	ID          string    `json:"id"`
	CandidateID string    `json:"candidate_id"`
	BenchmarkID *string   `json:"benchmark_id"`
	Score       *float64  `json:"score"`
	Passed      bool      `json:"passed"`
	Report      *string   `json:"report"`
	EvaluatedBy *string   `json:"evaluated_by"`
	CreatedAt   time.Time `json:"created_at"`
}

// NewSkillCandidate is what a candidate is made from.
type NewSkillCandidate struct {
	SkillKey           string
	SourceExecutionIDs []string
	ScenarioKey        *string
	PayloadRef         *string
	Summary            *string
	UsageNotes         *string
	Preconditions      map[string]any
	Postconditions     map[string]any
}

// NewSkillEvaluation is one evaluation's result.
type NewSkillEvaluation struct {
	Passed      bool
	Score       *float64
	BenchmarkID *string
	Report      *string
}

// SkillQuery filters and pages a list: Status (candidates) or Stage (releases), SkillKey, ActiveOnly (releases).
type SkillQuery struct {
	Status, Stage, SkillKey string
	ActiveOnly              bool
	Limit, Offset           int
}

// skillOwner is whose skill records p reads and writes: its own, an admin's included (Bay scopes skills by owner).
func (s *Service) skillOwner(p Principal) (string, error) {
	if s.cfg.Skills == nil {
		return "", Errorf(CodeCapability, "skills are not kept by this gateway").With("capability", "skills").With("available", []string{})
	}
	if p.Owner == "" {
		return "", Errorf(CodeForbidden, "skills belong to an owner; this caller names none")
	}
	return p.Owner, nil
}

func checkText(name string, v *string, max int) error {
	if v != nil && len(*v) > max {
		return Errorf(CodeValidation, "%s is longer than %d bytes", name, max)
	}
	return nil
}

func checkObject(name string, v map[string]any) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Errorf(CodeValidation, "%s is not a JSON object: %v", name, err)
	}
	if len(b) > MaxSkillText {
		return Errorf(CodeValidation, "%s is longer than %d bytes of JSON", name, MaxSkillText)
	}
	return nil
}

// updateSkills runs fn over owner's records in one transaction and bumps the owner's revision with it.
func (s *Service) updateSkills(owner string, fn func(sandboxes.SkillTx) error) error {
	return s.cfg.Skills.UpdateSkills(owner, func(tx sandboxes.SkillTx) error {
		if err := fn(tx); err != nil {
			return err
		}
		rev, err := skillRevision(tx)
		if err != nil {
			return err
		}
		return tx.Put(sandboxes.SkillRevisions, "rev", binary.BigEndian.AppendUint64(nil, rev+1))
	})
}

// skillRevision is the owner's revision: 0 before the first change.
func skillRevision(tx sandboxes.SkillTx) (uint64, error) {
	b, err := tx.Get(sandboxes.SkillRevisions, "rev")
	if err != nil || len(b) != 8 {
		return 0, err
	}
	return binary.BigEndian.Uint64(b), nil
}

// skillGet decodes the record kind/id into v; false when there is none.
func skillGet(tx sandboxes.SkillTx, kind sandboxes.SkillKind, id string, v any) (bool, error) {
	b, err := tx.Get(kind, id)
	if err != nil || b == nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decoding skill %s %s: %w", kind, id, err)
	}
	return true, nil
}

// skillPut encodes v as the record kind/id; a new id past quota records of kind is quota_exceeded.
func skillPut(tx sandboxes.SkillTx, kind sandboxes.SkillKind, id string, v any, quota int) error {
	if quota > 0 {
		n, err := tx.Count(kind)
		if err != nil {
			return err
		}
		if n >= quota {
			return Errorf(CodeQuotaExceeded, "an owner keeps at most %d skill %s", quota, kind)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding skill %s %s: %w", kind, id, err)
	}
	return tx.Put(kind, id, b)
}

// skillAll decodes every record of kind.
func skillAll[T any](tx sandboxes.SkillTx, kind sandboxes.SkillKind) ([]*T, error) {
	var out []*T
	err := tx.Each(kind, func(id string, b []byte) error {
		v := new(T)
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("decoding skill %s %s: %w", kind, id, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// skillWrap keeps the service's typed errors and names what was being done for the others.
func skillWrap(err error, doing string) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// page returns items[offset:offset+limit] after checking the bounds (Bay: 1..500, >= 0).
func page[T any](items []T, limit, offset int) ([]T, int, error) {
	if limit <= 0 || limit > MaxSkillPageLimit {
		return nil, 0, Errorf(CodeValidation, "limit must be between 1 and %d", MaxSkillPageLimit)
	}
	if offset < 0 {
		return nil, 0, Errorf(CodeValidation, "offset must be >= 0")
	}
	total := len(items)
	if offset >= total {
		return []T{}, total, nil
	}
	return items[offset:min(total, offset+limit)], total, nil
}

// CreateSkillPayload stores a JSON object or array (Bay's POST /v1/skills/payloads).
func (s *Service) CreateSkillPayload(_ context.Context, p Principal, kind string, payload json.RawMessage) (*SkillPayload, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	if kind == "" {
		kind = "generic"
	}
	if len(kind) > MaxSkillKey {
		return nil, Errorf(CodeValidation, "kind is longer than %d bytes", MaxSkillKey)
	}
	if len(payload) > MaxSkillPayload {
		return nil, Errorf(CodePayloadTooLarge, "a skill payload is at most %d bytes of JSON", MaxSkillPayload)
	}
	trimmed := bytes.TrimSpace(payload)
	if !json.Valid(trimmed) || len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return nil, Errorf(CodeValidation, "payload must be a JSON object or array")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, trimmed); err != nil {
		return nil, Errorf(CodeValidation, "payload: %v", err)
	}
	blob := &SkillPayload{ID: NewID("blob-"), Kind: kind, Payload: compact.Bytes(), CreatedAt: s.cfg.Now().UTC()}
	err = s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		return skillPut(tx, sandboxes.SkillPayloads, blob.ID, blob, s.cfg.MaxSkillRecords)
	})
	return blob, skillWrap(err, "storing a skill payload")
}

// ParseSkillPayloadRef returns the payload id a ref names: "blob:<id>" only (Bay's rule).
func ParseSkillPayloadRef(ref string) (string, error) {
	id, ok := strings.CutPrefix(ref, skillBlobRefPrefix)
	if !ok {
		return "", Errorf(CodeValidation, "Unsupported payload_ref: %s", ref)
	}
	if id == "" || len(id) > MaxSkillKey {
		return "", Errorf(CodeValidation, "Invalid payload_ref: %s", ref)
	}
	return id, nil
}

// TraceKindPayload is the kind a browser trace is served under as a payload (Bay's artifact blob kind).
const TraceKindPayload = "browser_trace"

// SkillPayload reads the payload ref names (Bay's GET /v1/skills/payloads/{ref}): a stored payload of p's, else a
// browser trace, under the rule traces are read by (TracePayload: p must see the sandbox that recorded it).
func (s *Service) SkillPayload(ctx context.Context, p Principal, ref string) (*SkillPayload, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	id, err := ParseSkillPayloadRef(ref)
	if err != nil {
		return nil, err
	}
	blob := new(SkillPayload)
	var found bool
	err = s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		found, err = skillGet(tx, sandboxes.SkillPayloads, id, blob)
		return err
	})
	if err != nil {
		return nil, skillWrap(err, "reading a skill payload")
	}
	if !found {
		trace, err := s.TracePayload(ctx, p, ref)
		if err != nil {
			if AsError(err).Code == CodeNotFound {
				return nil, Errorf(CodeNotFound, "Artifact blob not found: %s", clip(id))
			}
			return nil, err
		}
		return &SkillPayload{ID: id, Kind: TraceKindPayload, Payload: trace}, nil
	}
	return blob, nil
}

// CreateSkillCandidate makes a draft candidate from executions of p's sandboxes (Bay's POST /v1/skills/candidates).
// An execution p does not own is refused as if it did not exist.
func (s *Service) CreateSkillCandidate(ctx context.Context, p Principal, req NewSkillCandidate) (*SkillCandidate, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	key := strings.TrimSpace(req.SkillKey)
	switch {
	case key == "":
		return nil, Errorf(CodeValidation, "skill_key must not be empty")
	case len(key) > MaxSkillKey:
		return nil, Errorf(CodeValidation, "skill_key is longer than %d bytes", MaxSkillKey)
	case len(req.SourceExecutionIDs) == 0:
		return nil, Errorf(CodeValidation, "source_execution_ids must not be empty")
	case len(req.SourceExecutionIDs) > MaxSkillSources:
		return nil, Errorf(CodeValidation, "source_execution_ids has more than %d items", MaxSkillSources)
	}
	for _, c := range []struct {
		name string
		v    *string
		max  int
	}{{"scenario_key", req.ScenarioKey, MaxSkillKey}, {"payload_ref", req.PayloadRef, MaxSkillText},
		{"summary", req.Summary, MaxSkillText}, {"usage_notes", req.UsageNotes, MaxSkillText}} {
		if err := checkText(c.name, c.v, c.max); err != nil {
			return nil, err
		}
	}
	if err := checkObject("preconditions", req.Preconditions); err != nil {
		return nil, err
	}
	if err := checkObject("postconditions", req.Postconditions); err != nil {
		return nil, err
	}
	found, err := s.ownedExecutions(ctx, owner, req.SourceExecutionIDs)
	if err != nil {
		return nil, err
	}
	for _, id := range req.SourceExecutionIDs {
		if !found[id] {
			return nil, Errorf(CodeValidation, "Execution ID not found or not owned: %s", id)
		}
	}
	now := s.cfg.Now().UTC()
	c := &SkillCandidate{
		ID: NewID("sc-"), SkillKey: key, ScenarioKey: req.ScenarioKey, PayloadRef: req.PayloadRef, SkillType: SkillTypeCode,
		Summary: req.Summary, UsageNotes: req.UsageNotes, Preconditions: req.Preconditions, Postconditions: req.Postconditions,
		SourceExecutionIDs: slices.Clone(req.SourceExecutionIDs), Status: SkillDraft, CreatedBy: &owner,
		CreatedAt: now, UpdatedAt: now,
	}
	err = s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		return skillPut(tx, sandboxes.SkillCandidates, c.ID, c, s.cfg.MaxSkillRecords)
	})
	return c, skillWrap(err, "storing a skill candidate")
}

// ownedExecutions reports which of ids are executions in the history of owner's sandboxes.
func (s *Service) ownedExecutions(ctx context.Context, owner string, ids []string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = false
	}
	err := s.eachOwnerExecution(ctx, owner, func(e *sandboxes.HistoryEntry) {
		if _, ok := want[e.ID]; ok {
			want[e.ID] = true
		}
	})
	return want, err
}

// eachOwnerExecution calls fn for every recorded execution of owner's sandboxes. History lives as long as its
// sandbox (ReapHistory), so a deleted sandbox's executions are no longer evidence.
func (s *Service) eachOwnerExecution(ctx context.Context, owner string, fn func(*sandboxes.HistoryEntry)) error {
	if s.cfg.History == nil {
		return nil
	}
	cursor := ""
	for {
		boxes, next, err := s.cfg.Sandboxes.List(ctx, sandboxes.ListOptions{Owner: owner, Limit: 200, Cursor: cursor})
		if err != nil {
			return fmt.Errorf("listing the owner's sandboxes: %w", err)
		}
		for _, sb := range boxes {
			if sb.Owner != owner { // the core filters; this keeps the owner rule even if it did not
				continue
			}
			_, _, err := s.cfg.History.HistoryPage(sb.ID, func(e *sandboxes.HistoryEntry) bool { fn(e); return false }, 0, 0)
			if err != nil {
				return fmt.Errorf("reading the history of %s: %w", sb.ID, err)
			}
		}
		if next == "" || next == cursor {
			return nil
		}
		cursor = next
	}
}

// deleted reports whether the record that embeds d is soft-deleted.
func (d SkillDeletion) deleted() bool { return d.IsDeleted }

// skillGetLive reads the record id of kind that is not deleted; a missing or deleted one is not_found, "<what> not
// found: <id>".
func skillGetLive[T any, P interface {
	*T
	deleted() bool
}](tx sandboxes.SkillTx, kind sandboxes.SkillKind, id, what string) (*T, error) {
	v := P(new(T))
	found, err := skillGet(tx, kind, id, v)
	if err != nil {
		return nil, err
	}
	if !found || v.deleted() {
		return nil, Errorf(CodeNotFound, "%s not found: %s", what, id)
	}
	return v, nil
}

// getCandidate reads a candidate that is not deleted.
func getCandidate(tx sandboxes.SkillTx, id string) (*SkillCandidate, error) {
	return skillGetLive[SkillCandidate](tx, sandboxes.SkillCandidates, id, "Skill candidate")
}

// SkillCandidate reads one of p's candidates.
func (s *Service) SkillCandidate(_ context.Context, p Principal, id string) (*SkillCandidate, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	var c *SkillCandidate
	err = s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		c, err = getCandidate(tx, id)
		return err
	})
	return c, skillWrap(err, "reading a skill candidate")
}

// SkillCandidates lists p's candidates, newest first, filtered by q.Status and q.SkillKey.
func (s *Service) SkillCandidates(_ context.Context, p Principal, q SkillQuery) ([]*SkillCandidate, int, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, 0, err
	}
	if q.Status != "" && !slices.Contains(SkillStatuses, q.Status) {
		return nil, 0, Errorf(CodeValidation, "Invalid candidate status: %s", q.Status)
	}
	return listSkills(s, owner, sandboxes.SkillCandidates, q, func(c *SkillCandidate) bool {
		return c.IsDeleted || (q.Status != "" && c.Status != q.Status) || (q.SkillKey != "" && c.SkillKey != q.SkillKey)
	}, func(a, b *SkillCandidate) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// listSkills reads owner's records of kind, drops those drop says, sorts the rest stably by cmp and answers q's page
// with the count of all kept.
func listSkills[T any](s *Service, owner string, kind sandboxes.SkillKind, q SkillQuery, drop func(*T) bool, cmp func(a, b *T) int) ([]*T, int, error) {
	var all []*T
	err := s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		var err error
		all, err = skillAll[T](tx, kind)
		return err
	})
	if err != nil {
		return nil, 0, skillWrap(err, "listing skill "+string(kind))
	}
	all = slices.DeleteFunc(all, drop)
	slices.SortStableFunc(all, cmp)
	return page(all, q.Limit, q.Offset)
}

// EvaluateSkillCandidate records an evaluation: the candidate is evaluating, or rejected when it failed.
func (s *Service) EvaluateSkillCandidate(_ context.Context, p Principal, id string, req NewSkillEvaluation) (*SkillEvaluation, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	if req.Score != nil && (math.IsNaN(*req.Score) || math.IsInf(*req.Score, 0)) {
		return nil, Errorf(CodeValidation, "score must be a finite number")
	}
	if err := checkText("benchmark_id", req.BenchmarkID, MaxSkillKey); err != nil {
		return nil, err
	}
	if err := checkText("report", req.Report, MaxSkillText); err != nil {
		return nil, err
	}
	now := s.cfg.Now().UTC()
	ev := &SkillEvaluation{ID: NewID("se-"), CandidateID: id, BenchmarkID: req.BenchmarkID, Score: req.Score,
		Passed: req.Passed, Report: req.Report, EvaluatedBy: &owner, CreatedAt: now}
	err = s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		c, err := getCandidate(tx, id)
		if err != nil {
			return err
		}
		c.Status = SkillEvaluating
		if !req.Passed {
			c.Status = SkillRejected
		}
		c.LatestScore, c.LatestPass, c.LastEvaluatedAt, c.UpdatedAt = req.Score, &req.Passed, &now, now
		if err := skillPut(tx, sandboxes.SkillEvaluations, ev.ID, ev, s.cfg.MaxSkillRecords); err != nil {
			return err
		}
		return skillPut(tx, sandboxes.SkillCandidates, c.ID, c, 0)
	})
	if err != nil {
		return nil, skillWrap(err, "storing a skill evaluation")
	}
	return ev, nil
}

// DeleteSkillCandidate soft-deletes a candidate; one an active release was promoted from is a conflict.
func (s *Service) DeleteSkillCandidate(_ context.Context, p Principal, id string, reason *string) (*SkillDeletion, error) {
	return s.softDeleteSkill(p, reason, "deleting a skill candidate", func(tx sandboxes.SkillTx, del SkillDeletion) error {
		c, err := getCandidate(tx, id)
		if err != nil {
			return err
		}
		releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		for _, r := range releases {
			if r.CandidateID == id && r.IsActive && !r.IsDeleted {
				return Errorf(CodeConflict, "Candidate referenced by active release cannot be deleted").With("candidate_id", id)
			}
		}
		c.SkillDeletion = del
		return skillPut(tx, sandboxes.SkillCandidates, c.ID, c, 0)
	})
}

// softDeleteSkill is the frame of a soft delete by p: the reason checked, then fn run in one write transaction with
// the deletion to record (now, by p's owner, for reason), which it answers; doing names the work in errors.
func (s *Service) softDeleteSkill(p Principal, reason *string, doing string, fn func(tx sandboxes.SkillTx, del SkillDeletion) error) (*SkillDeletion, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, err
	}
	if err := checkText("reason", reason, MaxSkillText); err != nil {
		return nil, err
	}
	var del SkillDeletion
	err = s.updateSkills(owner, func(tx sandboxes.SkillTx) error {
		now := s.cfg.Now().UTC()
		del = SkillDeletion{IsDeleted: true, DeletedAt: &now, DeletedBy: &owner, DeleteReason: reason}
		return fn(tx, del)
	})
	if err != nil {
		return nil, skillWrap(err, doing)
	}
	return &del, nil
}
