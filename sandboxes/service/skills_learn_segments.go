package service

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// What the browser learning pass (skills_learn.go) takes from one run: its steps, the segments worth replaying,
// each segment's score, and the skill and scenario keys the run names. Bay's rules, from its observable behaviour:
// a segment is two or more consecutive steps that succeeded, are actions (not read-only commands) and are named;
// the score grows with the segment's length. The trace is tenant text (commands and what the pages printed), so
// this parses it defensively: anything malformed yields fewer steps, never an error or a panic (FuzzLearnSteps).

// learnStep is one normalised step of a run, as a segment's payload holds it.
type learnStep struct {
	Cmd      string `json:"cmd"`
	ExitCode int    `json:"exit_code"`
	Kind     string `json:"kind"`
}

// learnReadOnly are the command prefixes that only read the page (Bay's list): they end a segment.
var learnReadOnly = []string{"snapshot", "get ", "is ", "wait", "cookies", "storage", "network requests", "tab", "frame", "dialog"}

// learnMinSegment is the fewest steps a segment has.
const learnMinSegment = 2

// learnSteps normalises a run's trace: its "steps" (or the trace itself when it is one step, or an array of steps);
// with none, the run's code as one step that succeeded when the run did (Bay's fallback). Steps without a command
// are dropped; an exit code that is not an integer counts as a failure.
func learnSteps(trace []byte, code string, success bool) []learnStep {
	var doc any
	if len(trace) > 0 {
		_ = json.Unmarshal(trace, &doc) // malformed: no steps, the fallback below
	}
	var raw []any
	switch d := doc.(type) {
	case map[string]any:
		if steps, ok := d["steps"].([]any); ok {
			raw = steps
		} else if _, ok := d["cmd"]; ok {
			raw = []any{d}
		}
	case []any:
		raw = d
	}
	var objs []map[string]any
	for _, r := range raw {
		if m, ok := r.(map[string]any); ok {
			objs = append(objs, m)
		}
	}
	if len(objs) == 0 {
		exit := 1
		if success {
			exit = 0
		}
		objs = []map[string]any{{"cmd": code, "exit_code": float64(exit), "kind": "individual_action"}}
	}
	var out []learnStep
	for _, m := range objs {
		cmd := strings.TrimSpace(jsonText(m["cmd"]))
		if cmd == "" {
			continue
		}
		kind := "individual_action"
		if k, ok := m["kind"]; ok {
			kind = jsonText(k)
		}
		out = append(out, learnStep{Cmd: cmd, ExitCode: exitCode(m["exit_code"]), Kind: kind})
	}
	return out
}

// jsonText is a JSON value as text: a string as itself, anything else (but null) as its JSON.
func jsonText(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}

// exitCode reads an exit code: an integral number or a decimal string; anything else is 1 (a failure).
func exitCode(v any) int {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<31 {
			return int(t)
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(t)); err == nil {
			return n
		}
	}
	return 1
}

// learnSegments splits steps into the segments worth a candidate: maximal runs of at least learnMinSegment steps
// that succeeded, are individual actions and are not read-only.
func learnSegments(steps []learnStep) [][]learnStep {
	var segs [][]learnStep
	var cur []learnStep
	end := func() {
		if len(cur) >= learnMinSegment {
			segs = append(segs, cur)
		}
		cur = nil
	}
	for _, st := range steps {
		if st.ExitCode != 0 || st.Kind != "individual_action" || st.Cmd == "" || readOnlyCommand(st.Cmd) {
			end()
			continue
		}
		cur = append(cur, st)
	}
	end()
	return segs
}

func readOnlyCommand(cmd string) bool {
	c := strings.ToLower(strings.TrimSpace(cmd))
	for _, p := range learnReadOnly {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}

// learnMetrics is a segment's automatic evaluation (Bay's report fields, in its order).
type learnMetrics struct {
	Score         float64 `json:"score"`
	ReplaySuccess float64 `json:"replay_success"`
	Samples       int     `json:"samples"`
	ErrorRate     float64 `json:"error_rate"`
	P95Duration   int64   `json:"p95_duration"`
}

// scoreSegment is Bay's heuristic: 0.75 plus 0.08 a step (at most 0.99), ten samples a step, every step replayed.
func scoreSegment(seg []learnStep) learnMetrics {
	n := len(seg)
	m := learnMetrics{Score: round4(math.Min(0.99, 0.75+0.08*float64(n))), Samples: n * 10}
	if n > 0 {
		m.ReplaySuccess = 1
	}
	m.ErrorRate = round4(1 - m.ReplaySuccess)
	return m
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// learnSkillKey is the skill a run names with a "skill:<key>" tag (the first), else browser-<sandbox>.
func learnSkillKey(tags *string, sandboxID string) string {
	if tags != nil {
		for _, t := range strings.Split(*tags, ",") {
			if k, ok := strings.CutPrefix(strings.TrimSpace(t), "skill:"); ok && k != "" {
				return cutText(k, MaxSkillKey)
			}
		}
	}
	return cutText("browser-"+sandboxID, MaxSkillKey)
}

// learnScenarioKey is the run's description as a key: lower case, every run of characters other than ASCII
// letters, digits, '.', '_' and '-' replaced by '-', trimmed of '-', at most 64 bytes; nil when nothing is left.
func learnScenarioKey(desc *string) *string {
	if desc == nil {
		return nil
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(strings.TrimSpace(*desc)) {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	k := strings.Trim(b.String(), "-")
	if len(k) > 64 {
		k = k[:64]
	}
	if k == "" {
		return nil
	}
	return &k
}
