package e2b

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Logs: GET /sandboxes/{id}/logs (v1: ?start=<ms>&limit=, {logs:[{timestamp,line}], logEntries:[...]}) and GET
// /v2/sandboxes/{id}/logs (?cursor=<ms>&limit=&direction=forward|backward&level=&search=, {logs:[SandboxLogEntry]})
// answer the sandbox's container output: its agent's JSON log and whatever a supervised entrypoint or a process
// writing to the container's stdout or stderr printed. That is the tenant's content, read through the Manager
// with its bounds (sandboxes.MaxLogLines, MaxLogLineBytes, a time limit); a JSON line is read as a structured entry
// (its level, msg and other fields), any other line as an info entry whose message is the line.

// Bounds of the logs query.
const (
	maxLogLimit  = 1000 // the spec's maximum of limit (v2) and its default (both)
	maxLogSearch = 256  // the spec's maxLength of search
	maxLogFields = 32   // fields kept of one structured line
)

// LogEntry is SandboxLogEntry.
type LogEntry struct {
	Timestamp string            `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// LogLine is SandboxLog (v1).
type LogLine struct {
	Timestamp string `json:"timestamp"`
	Line      string `json:"line"`
}

var logLevels = map[string]int{"debug": 0, "info": 1, "warn": 2, "error": 3}

// LogQuery is a parsed logs query.
type LogQuery struct {
	Core     sandboxes.LogQuery
	Limit    int
	MinLevel int
	Search   string
}

// ParseLogQuery reads either version's query: v2 names the start cursor, v1 start.
func ParseLogQuery(q url.Values, v2 bool) (LogQuery, *Error) {
	out := LogQuery{Limit: maxLogLimit}
	startKey := "start"
	if v2 {
		startKey = "cursor"
	}
	for k := range q {
		switch k {
		case startKey, "limit":
		case "direction", "level", "search":
			if !v2 {
				return out, errorf(http.StatusBadRequest, "%s is a query of /v2/sandboxes/{id}/logs", k)
			}
		default:
			return out, errorf(http.StatusBadRequest, "unknown query parameter %q", k)
		}
	}
	if v := q.Get(startKey); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > 1<<53 {
			return out, errorf(http.StatusBadRequest, "%s must be a timestamp in milliseconds", startKey)
		}
		out.Core.Since = time.UnixMilli(ms)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || (v2 && n > maxLogLimit) {
			return out, errorf(http.StatusBadRequest, "limit must be from 0 to %d", maxLogLimit)
		}
		out.Limit = min(n, maxLogLimit)
	}
	switch d := q.Get("direction"); d {
	case "", "forward":
	case "backward":
		// Lines before the cursor, newest first.
		out.Core.Backward, out.Core.Until, out.Core.Since = true, out.Core.Since, time.Time{}
	default:
		return out, errorf(http.StatusBadRequest, "direction must be forward or backward")
	}
	if l := q.Get("level"); l != "" {
		n, ok := logLevels[l]
		if !ok {
			return out, errorf(http.StatusBadRequest, "level must be debug, info, warn or error")
		}
		out.MinLevel = n
	}
	out.Search = q.Get("search")
	if len(out.Search) > maxLogSearch {
		return out, errorf(http.StatusBadRequest, "search is at most %d bytes", maxLogSearch)
	}
	// Filters drop lines after the read: read as many as the Manager allows, then keep limit.
	out.Core.Limit = out.Limit
	if out.MinLevel > 0 || out.Search != "" {
		out.Core.Limit = sandboxes.MaxLogLines
	}
	return out, nil
}

// Entry reads one line of output as E2B's structured entry. A JSON object line (the agent's slog output) gives
// its level, msg and up to maxLogFields other fields as strings; anything else is an info entry of the line.
func Entry(l sandboxes.LogLine) LogEntry {
	e := LogEntry{Timestamp: rfc3339(l.Time), Level: "info", Message: l.Text, Fields: map[string]string{"stream": l.Stream}}
	if !strings.HasPrefix(l.Text, "{") {
		return e
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(l.Text), &obj) != nil {
		return e
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := obj[k]
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		switch k {
		case "msg":
			e.Message = s
		case "level":
			if lv := strings.ToLower(s); logLevels[lv] > 0 || lv == "debug" {
				e.Level = lv
			} else if lv == "warning" {
				e.Level = "warn"
			}
		case "time", "stream":
			// The line's time and stream are the engine's: a line cannot forge them.
		default:
			if len(e.Fields) < maxLogFields {
				e.Fields[k] = s
			}
		}
	}
	return e
}

func (h *Handler) logs(w http.ResponseWriter, r *http.Request, p service.Principal) {
	v2 := strings.HasPrefix(strings.TrimPrefix(r.URL.Path, h.cfg.Prefix), "/v2/")
	id := r.PathValue("id")
	q, e := ParseLogQuery(r.URL.Query(), v2)
	if e != nil {
		writeError(w, e)
		return
	}
	if _, _, e := h.sandbox(r.Context(), p, id); e != nil {
		writeError(w, e)
		return
	}
	var lines []sandboxes.LogLine
	if q.Limit > 0 {
		var err error
		if lines, err = h.svc.Logs(r.Context(), p, id, q.Core); err != nil {
			writeError(w, toError(err))
			return
		}
	}
	entries := []LogEntry{}
	kept := []sandboxes.LogLine{}
	for _, l := range lines {
		en := Entry(l)
		if logLevels[en.Level] < q.MinLevel || (q.Search != "" && !strings.Contains(en.Message, q.Search)) {
			continue
		}
		entries, kept = append(entries, en), append(kept, l)
	}
	if q.Core.Backward {
		// The last limit lines before the cursor, newest first.
		if len(entries) > q.Limit {
			entries, kept = entries[len(entries)-q.Limit:], kept[len(kept)-q.Limit:]
		}
		for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
			entries[i], entries[j] = entries[j], entries[i]
			kept[i], kept[j] = kept[j], kept[i]
		}
	} else if len(entries) > q.Limit {
		entries, kept = entries[:q.Limit], kept[:q.Limit]
	}
	if v2 {
		writeJSON(w, http.StatusOK, map[string]any{"logs": entries})
		return
	}
	out := make([]LogLine, len(kept))
	for i, l := range kept {
		out[i] = LogLine{Timestamp: rfc3339(l.Time), Line: l.Text}
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out, "logEntries": entries})
}
