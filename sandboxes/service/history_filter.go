package service

import (
	"slices"
	"strings"

	"github.com/sandgate/sandgate/sandboxes"
)

// ExecTypes are the execution types the history records (Bay's names).
var ExecTypes = []string{"python", "shell", "browser", "browser_batch"}

// HistoryFilter selects executions of a history (Bay's GET S/history query, the MCP history tools).
type HistoryFilter struct {
	ExecType       string // "" any
	SuccessOnly    bool
	Tags           string // comma-separated: an entry with any of them
	HasNotes       bool
	HasDescription bool
}

// Keep reports whether e passes the filter.
func (f HistoryFilter) Keep() func(*sandboxes.HistoryEntry) bool {
	var want []string
	for _, t := range strings.Split(f.Tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			want = append(want, t)
		}
	}
	return func(e *sandboxes.HistoryEntry) bool {
		switch {
		case f.ExecType != "" && e.ExecType != f.ExecType,
			f.SuccessOnly && !e.Success,
			f.HasNotes && (e.Notes == nil || *e.Notes == ""),
			f.HasDescription && (e.Description == nil || *e.Description == ""):
			return false
		}
		if len(want) == 0 {
			return true
		}
		return e.Tags != nil && slices.ContainsFunc(strings.Split(*e.Tags, ","), func(t string) bool {
			return slices.Contains(want, strings.TrimSpace(t))
		})
	}
}
