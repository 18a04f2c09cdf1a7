package mcpapi

import (
	"context"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Execution history tools, with the names and arguments of Shipyard Neo's MCP server: the evidence the skills
// lifecycle starts from (an execution's id, annotated with a description, tags and notes).

// HistoryOps is what the history tools need of the service.
type HistoryOps interface {
	History(ctx context.Context, p service.Principal, id string, keep func(*sandboxes.HistoryEntry) bool, offset, limit int) ([]*sandboxes.HistoryEntry, int, error)
	UpdateHistory(ctx context.Context, p service.Principal, id, entry string, fn func(*sandboxes.HistoryEntry)) (*sandboxes.HistoryEntry, error)
}

var _ HistoryOps = (*service.Service)(nil)

func checkExecType(t string) error {
	if t != "" && !slices.Contains(service.ExecTypes, t) {
		return invalid("exec_type must be one of %v", service.ExecTypes)
	}
	return nil
}

type historyArgs struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"the sandbox"`
	ExecType       string `json:"exec_type,omitempty" jsonschema:"only this type: python, shell, browser or browser_batch"`
	SuccessOnly    bool   `json:"success_only,omitempty" jsonschema:"only successful executions"`
	Limit          int    `json:"limit,omitempty" jsonschema:"at most this many, newest first (1..500, default 50)"`
	Tags           string `json:"tags,omitempty" jsonschema:"comma-separated: entries with any of these tags"`
	HasNotes       bool   `json:"has_notes,omitempty" jsonschema:"only entries with notes"`
	HasDescription bool   `json:"has_description,omitempty" jsonschema:"only entries with a description"`
}

func (a historyArgs) validate() error {
	if a.Limit < 0 || a.Limit > 500 {
		return invalid("limit must be between 1 and 500")
	}
	return lastExecutionArgs{a.SandboxID, a.ExecType}.validate()
}

type executionArgs struct {
	SandboxID   string `json:"sandbox_id" jsonschema:"the sandbox"`
	ExecutionID string `json:"execution_id" jsonschema:"the execution's id"`
}

func (a executionArgs) validate() error {
	if err := required("execution_id", a.ExecutionID); err != nil {
		return err
	}
	return checkID(a.SandboxID)
}

type lastExecutionArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox"`
	ExecType  string `json:"exec_type,omitempty" jsonschema:"only this type: python, shell, browser or browser_batch"`
}

func (a lastExecutionArgs) validate() error {
	if err := checkExecType(a.ExecType); err != nil {
		return err
	}
	return checkID(a.SandboxID)
}

type annotateArgs struct {
	SandboxID   string  `json:"sandbox_id" jsonschema:"the sandbox"`
	ExecutionID string  `json:"execution_id" jsonschema:"the execution's id"`
	Description *string `json:"description,omitempty" jsonschema:"what the execution did"`
	Tags        *string `json:"tags,omitempty" jsonschema:"comma-separated tags"`
	Notes       *string `json:"notes,omitempty" jsonschema:"the agent's notes"`
}

func (a annotateArgs) validate() error { return executionArgs{a.SandboxID, a.ExecutionID}.validate() }

// historyTool registers a history tool whose run gets the HistoryOps.
func historyTool[In validator](s *Server, t *mcp.Tool, run func(ctx context.Context, o HistoryOps, p service.Principal, in In) (any, error)) {
	optionalTool(s, t, "execution history is not served by this gateway", run)
}

func (s *Server) addHistoryTools() {
	historyTool(s, &mcp.Tool{Name: "get_execution_history", Description: "List a sandbox's recorded executions " +
		"(code, success, output, execution_id), newest first, with optional filters."},
		func(ctx context.Context, o HistoryOps, p service.Principal, in historyArgs) (any, error) {
			limit := in.Limit
			if limit == 0 {
				limit = 50
			}
			keep := service.HistoryFilter{ExecType: in.ExecType, SuccessOnly: in.SuccessOnly, Tags: in.Tags,
				HasNotes: in.HasNotes, HasDescription: in.HasDescription}.Keep()
			entries, total, err := o.History(ctx, p, in.SandboxID, keep, 0, limit)
			return map[string]any{"entries": entries, "total": total}, err
		})
	historyTool(s, &mcp.Tool{Name: "get_execution", Description: "One recorded execution by its execution_id."},
		func(ctx context.Context, o HistoryOps, p service.Principal, in executionArgs) (any, error) {
			found, _, err := o.History(ctx, p, in.SandboxID, func(e *sandboxes.HistoryEntry) bool { return e.ID == in.ExecutionID }, 0, 1)
			if err != nil {
				return nil, err
			}
			if len(found) == 0 {
				return nil, service.Errorf(service.CodeNotFound, "Execution not found: %s", in.ExecutionID)
			}
			return found[0], nil
		})
	historyTool(s, &mcp.Tool{Name: "get_last_execution", Description: "The newest recorded execution of a sandbox."},
		func(ctx context.Context, o HistoryOps, p service.Principal, in lastExecutionArgs) (any, error) {
			found, _, err := o.History(ctx, p, in.SandboxID, service.HistoryFilter{ExecType: in.ExecType}.Keep(), 0, 1)
			if err != nil {
				return nil, err
			}
			if len(found) == 0 {
				return nil, service.Errorf(service.CodeNotFound, "No execution history for sandbox %s", in.SandboxID)
			}
			return found[0], nil
		})
	historyTool(s, &mcp.Tool{Name: "annotate_execution", Description: "Set the description, tags or notes of a " +
		"recorded execution (tags like release:<release_id> count toward a skill release's health)."},
		func(ctx context.Context, o HistoryOps, p service.Principal, in annotateArgs) (any, error) {
			return o.UpdateHistory(ctx, p, in.SandboxID, in.ExecutionID, func(e *sandboxes.HistoryEntry) {
				if in.Description != nil {
					e.Description = in.Description
				}
				if in.Tags != nil {
					e.Tags = in.Tags
				}
				if in.Notes != nil {
					e.Notes = in.Notes
				}
			})
		})
}
