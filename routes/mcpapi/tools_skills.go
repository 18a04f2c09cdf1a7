package mcpapi

import (
	"context"
	"encoding/json"
	"math"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Skills tools: the skills self-update lifecycle (sandboxes/service/skills.go), with the names and arguments of
// Shipyard Neo's MCP server, so an agent prompted for it works unchanged. Results are the records as JSON, like
// every tool here. get_skill_release_health is our addition (Bay's REST route, which Neo's server has no tool for).

// SkillOps is what the skills tools need of the service.
type SkillOps interface {
	CreateSkillPayload(ctx context.Context, p service.Principal, kind string, payload json.RawMessage) (*service.SkillPayload, error)
	SkillPayload(ctx context.Context, p service.Principal, ref string) (*service.SkillPayload, error)
	CreateSkillCandidate(ctx context.Context, p service.Principal, req service.NewSkillCandidate) (*service.SkillCandidate, error)
	SkillCandidates(ctx context.Context, p service.Principal, q service.SkillQuery) ([]*service.SkillCandidate, int, error)
	EvaluateSkillCandidate(ctx context.Context, p service.Principal, id string, req service.NewSkillEvaluation) (*service.SkillEvaluation, error)
	PromoteSkillCandidate(ctx context.Context, p service.Principal, id string, req service.SkillPromotion) (*service.SkillRelease, error)
	DeleteSkillCandidate(ctx context.Context, p service.Principal, id string, reason *string) (*service.SkillDeletion, error)
	SkillReleases(ctx context.Context, p service.Principal, q service.SkillQuery) ([]*service.SkillRelease, int, error)
	RollbackSkillRelease(ctx context.Context, p service.Principal, id string) (*service.SkillRelease, error)
	DeleteSkillRelease(ctx context.Context, p service.Principal, id string, reason *string) (*service.SkillDeletion, error)
	SkillReleaseHealth(ctx context.Context, p service.Principal, id string) (*service.SkillHealth, error)
}

// defaultSkillPage is Neo's MCP default page size.
const defaultSkillPage = 50

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func required(name, v string) error {
	if v == "" {
		return invalid("%s is required", name)
	}
	return nil
}

type skillPayloadArgs struct {
	Payload any    `json:"payload" jsonschema:"the payload: a JSON object or array"`
	Kind    string `json:"kind,omitempty" jsonschema:"what the payload is (default generic)"`
}

func (a skillPayloadArgs) validate() error {
	switch a.Payload.(type) {
	case map[string]any, []any:
		return nil
	}
	return invalid("payload must be a JSON object or array")
}

type payloadRefArgs struct {
	PayloadRef string `json:"payload_ref" jsonschema:"the payload's reference (blob:...), as create_skill_payload returned it"`
}

func (a payloadRefArgs) validate() error { return required("payload_ref", a.PayloadRef) }

type skillCandidateArgs struct {
	SkillKey           string         `json:"skill_key" jsonschema:"the skill's key; releases are versioned per key"`
	SourceExecutionIDs []string       `json:"source_execution_ids" jsonschema:"execution_id of the executions the skill is made from"`
	ScenarioKey        string         `json:"scenario_key,omitempty" jsonschema:"the scenario the skill serves"`
	PayloadRef         string         `json:"payload_ref,omitempty" jsonschema:"a stored payload (create_skill_payload)"`
	Summary            string         `json:"summary,omitempty" jsonschema:"what the skill does"`
	UsageNotes         string         `json:"usage_notes,omitempty" jsonschema:"how to use it"`
	Preconditions      map[string]any `json:"preconditions,omitempty" jsonschema:"what must hold before"`
	Postconditions     map[string]any `json:"postconditions,omitempty" jsonschema:"what holds after"`
}

func (a skillCandidateArgs) validate() error {
	if err := required("skill_key", a.SkillKey); err != nil {
		return err
	}
	if len(a.SourceExecutionIDs) == 0 {
		return invalid("source_execution_ids must name at least one execution")
	}
	return nil
}

type skillEvaluateArgs struct {
	CandidateID string   `json:"candidate_id" jsonschema:"the candidate"`
	Passed      *bool    `json:"passed" jsonschema:"whether the evaluation passed"`
	Score       *float64 `json:"score,omitempty" jsonschema:"the evaluation's score"`
	BenchmarkID string   `json:"benchmark_id,omitempty" jsonschema:"the benchmark it ran"`
	Report      string   `json:"report,omitempty" jsonschema:"the evaluation's report"`
}

func (a skillEvaluateArgs) validate() error {
	if a.Passed == nil {
		return invalid("passed is required (true or false)")
	}
	if a.Score != nil && (math.IsNaN(*a.Score) || math.IsInf(*a.Score, 0)) {
		return invalid("score must be a finite number")
	}
	return required("candidate_id", a.CandidateID)
}

type promoteArgs struct {
	CandidateID        string `json:"candidate_id" jsonschema:"a candidate whose latest evaluation passed"`
	Stage              string `json:"stage,omitempty" jsonschema:"canary (default) or stable"`
	UpgradeOfReleaseID string `json:"upgrade_of_release_id,omitempty" jsonschema:"the release this one upgrades"`
	UpgradeReason      string `json:"upgrade_reason,omitempty" jsonschema:"why"`
	ChangeSummary      string `json:"change_summary,omitempty" jsonschema:"what changed"`
}

func (a promoteArgs) validate() error { return required("candidate_id", a.CandidateID) }

type skillListArgs struct {
	Status     string `json:"status,omitempty" jsonschema:"candidates only: draft, evaluating, promoted, rejected or rolled_back"`
	Stage      string `json:"stage,omitempty" jsonschema:"releases only: canary or stable"`
	SkillKey   string `json:"skill_key,omitempty" jsonschema:"only this skill key"`
	ActiveOnly bool   `json:"active_only,omitempty" jsonschema:"releases only: only active releases"`
	Limit      int    `json:"limit,omitempty" jsonschema:"at most this many (1..500, default 50)"`
	Offset     int    `json:"offset,omitempty" jsonschema:"skip this many"`
}

func (a skillListArgs) validate() error {
	if a.Limit < 0 || a.Limit > service.MaxSkillPageLimit || a.Offset < 0 {
		return invalid("limit must be between 1 and %d and offset at least 0", service.MaxSkillPageLimit)
	}
	return nil
}

func (a skillListArgs) query() service.SkillQuery {
	limit := a.Limit
	if limit == 0 {
		limit = defaultSkillPage
	}
	return service.SkillQuery{Status: a.Status, Stage: a.Stage, SkillKey: a.SkillKey, ActiveOnly: a.ActiveOnly, Limit: limit, Offset: a.Offset}
}

type releaseArgs struct {
	ReleaseID string `json:"release_id" jsonschema:"the release"`
}

func (a releaseArgs) validate() error { return required("release_id", a.ReleaseID) }

type deleteReleaseArgs struct {
	ReleaseID string `json:"release_id" jsonschema:"the release"`
	Reason    string `json:"reason,omitempty" jsonschema:"why it is deleted"`
}

func (a deleteReleaseArgs) validate() error { return required("release_id", a.ReleaseID) }

type deleteCandidateArgs struct {
	CandidateID string `json:"candidate_id" jsonschema:"the candidate"`
	Reason      string `json:"reason,omitempty" jsonschema:"why it is deleted"`
}

func (a deleteCandidateArgs) validate() error { return required("candidate_id", a.CandidateID) }

// skillTool registers a skills tool whose run gets the SkillOps; a configuration without them answers
// capability_not_supported.
func skillTool[In validator](s *Server, t *mcp.Tool, run func(ctx context.Context, o SkillOps, p service.Principal, in In) (any, error)) {
	optionalTool(s, t, "skills are not served by this gateway", run)
}

func (s *Server) addSkillTools() {
	skillTool(s, &mcp.Tool{Name: "create_skill_payload", Description: "Store a JSON object or array (a skill's " +
		"commands, a trace) and get its payload_ref, for create_skill_candidate."},
		func(ctx context.Context, o SkillOps, p service.Principal, in skillPayloadArgs) (any, error) {
			b, err := json.Marshal(in.Payload)
			if err != nil {
				return nil, invalid("payload: %v", err)
			}
			blob, err := o.CreateSkillPayload(ctx, p, in.Kind, b)
			if err != nil {
				return nil, err
			}
			return map[string]any{"payload_ref": blob.Ref(), "kind": blob.Kind}, nil
		})
	skillTool(s, &mcp.Tool{Name: "get_skill_payload", Description: "Read a stored skill payload by its payload_ref."},
		func(ctx context.Context, o SkillOps, p service.Principal, in payloadRefArgs) (any, error) {
			blob, err := o.SkillPayload(ctx, p, in.PayloadRef)
			if err != nil {
				return nil, err
			}
			return map[string]any{"payload_ref": in.PayloadRef, "kind": blob.Kind, "payload": blob.Payload}, nil
		})
	skillTool(s, &mcp.Tool{Name: "create_skill_candidate", Description: "Propose a reusable skill made from " +
		"executions that worked (their execution_id, from run results or the execution history)."},
		func(ctx context.Context, o SkillOps, p service.Principal, in skillCandidateArgs) (any, error) {
			return o.CreateSkillCandidate(ctx, p, service.NewSkillCandidate{SkillKey: in.SkillKey,
				SourceExecutionIDs: in.SourceExecutionIDs, ScenarioKey: opt(in.ScenarioKey), PayloadRef: opt(in.PayloadRef),
				Summary: opt(in.Summary), UsageNotes: opt(in.UsageNotes), Preconditions: in.Preconditions,
				Postconditions: in.Postconditions})
		})
	skillTool(s, &mcp.Tool{Name: "evaluate_skill_candidate", Description: "Record an evaluation of a skill " +
		"candidate; a failed one rejects it, a passed one makes it promotable."},
		func(ctx context.Context, o SkillOps, p service.Principal, in skillEvaluateArgs) (any, error) {
			return o.EvaluateSkillCandidate(ctx, p, in.CandidateID, service.NewSkillEvaluation{Passed: *in.Passed,
				Score: in.Score, BenchmarkID: opt(in.BenchmarkID), Report: opt(in.Report)})
		})
	skillTool(s, &mcp.Tool{Name: "promote_skill_candidate", Description: "Release a candidate whose latest " +
		"evaluation passed as its skill's next version (canary or stable); it becomes the active release."},
		func(ctx context.Context, o SkillOps, p service.Principal, in promoteArgs) (any, error) {
			return o.PromoteSkillCandidate(ctx, p, in.CandidateID, service.SkillPromotion{Stage: in.Stage,
				UpgradeOfReleaseID: opt(in.UpgradeOfReleaseID), UpgradeReason: opt(in.UpgradeReason), ChangeSummary: opt(in.ChangeSummary)})
		})
	skillTool(s, &mcp.Tool{Name: "list_skill_candidates", Description: "List skill candidates, newest first."},
		func(ctx context.Context, o SkillOps, p service.Principal, in skillListArgs) (any, error) {
			items, total, err := o.SkillCandidates(ctx, p, in.query())
			return map[string]any{"items": items, "total": total}, err
		})
	skillTool(s, &mcp.Tool{Name: "list_skill_releases", Description: "List skill releases, newest first."},
		func(ctx context.Context, o SkillOps, p service.Principal, in skillListArgs) (any, error) {
			items, total, err := o.SkillReleases(ctx, p, in.query())
			return map[string]any{"items": items, "total": total}, err
		})
	skillTool(s, &mcp.Tool{Name: "delete_skill_release", Description: "Delete a skill release (it stops being active)."},
		func(ctx context.Context, o SkillOps, p service.Principal, in deleteReleaseArgs) (any, error) {
			d, err := o.DeleteSkillRelease(ctx, p, in.ReleaseID, opt(in.Reason))
			return deleted(in.ReleaseID, d), err
		})
	skillTool(s, &mcp.Tool{Name: "delete_skill_candidate", Description: "Delete a skill candidate (not one an " +
		"active release was made from)."},
		func(ctx context.Context, o SkillOps, p service.Principal, in deleteCandidateArgs) (any, error) {
			d, err := o.DeleteSkillCandidate(ctx, p, in.CandidateID, opt(in.Reason))
			return deleted(in.CandidateID, d), err
		})
	skillTool(s, &mcp.Tool{Name: "rollback_skill_release", Description: "Roll a release back: the version before " +
		"it is released again as a new version and becomes active."},
		func(ctx context.Context, o SkillOps, p service.Principal, in releaseArgs) (any, error) {
			return o.RollbackSkillRelease(ctx, p, in.ReleaseID)
		})
	skillTool(s, &mcp.Tool{Name: "get_skill_release_health", Description: "A release's health over its first 24 " +
		"hours (executions tagged release:<release_id>) against the version before it, and whether to roll back."},
		func(ctx context.Context, o SkillOps, p service.Principal, in releaseArgs) (any, error) {
			return o.SkillReleaseHealth(ctx, p, in.ReleaseID)
		})
}

func deleted(id string, d *service.SkillDeletion) map[string]any {
	if d == nil {
		return nil
	}
	return map[string]any{"id": id, "deleted_at": d.DeletedAt, "deleted_by": d.DeletedBy, "delete_reason": d.DeleteReason}
}
