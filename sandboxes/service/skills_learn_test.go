package service

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestLearnSegments: a segment is two or more consecutive successful, named, non read-only individual actions;
// anything else ends one (Bay's rule).
func TestLearnSegments(t *testing.T) {
	step := func(cmd string, exit int) learnStep {
		return learnStep{Cmd: cmd, ExitCode: exit, Kind: "individual_action"}
	}
	cmds := func(segs [][]learnStep) [][]string {
		out := [][]string{}
		for _, s := range segs {
			var c []string
			for _, st := range s {
				c = append(c, st.Cmd)
			}
			out = append(out, c)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		steps []learnStep
		want  [][]string
	}{
		{"none", nil, [][]string{}},
		{"one action", []learnStep{step("open a", 0)}, [][]string{}},
		{"three actions", []learnStep{step("open a", 0), step("eval 1", 0), step("screenshot", 0)}, [][]string{{"open a", "eval 1", "screenshot"}}},
		{"read-only splits", []learnStep{step("open a", 0), step("eval 1", 0), step("Get title", 0), step("open b", 0), step("eval 2", 0)},
			[][]string{{"open a", "eval 1"}, {"open b", "eval 2"}}},
		{"failure splits", []learnStep{step("open a", 0), step("eval 1", 1), step("open b", 0), step("eval 2", 0), step("eval 3", 0)},
			[][]string{{"open b", "eval 2", "eval 3"}}},
		{"other kinds split", []learnStep{step("open a", 0), {Cmd: "eval 1", Kind: "note"}, step("open b", 0)}, [][]string{}},
		{"every read-only prefix", []learnStep{step("snapshot -i", 0), step("wait 1", 0), step("is visible x", 0), step("cookies", 0),
			step("storage local", 0), step("network requests", 0), step("tab 2", 0), step("frame x", 0), step("dialog accept", 0)}, [][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cmds(learnSegments(tc.steps)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("segments %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLearnSteps: the trace's steps, normalised; malformed parts are dropped, not errors; no steps falls back to the
// run's code.
func TestLearnSteps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trace   string
		code    string
		success bool
		want    []learnStep
	}{
		{"exec trace", `{"kind":"browser_exec_trace","steps":[{"kind":"individual_action","cmd":" open x ","exit_code":0}]}`, "", true,
			[]learnStep{{"open x", 0, "individual_action"}}},
		{"kind defaults, exit codes read", `{"steps":[{"cmd":"a","exit_code":"0"},{"cmd":"b","exit_code":2.5},{"cmd":"c"},{"cmd":"","exit_code":0},7]}`, "", true,
			[]learnStep{{"a", 0, "individual_action"}, {"b", 1, "individual_action"}, {"c", 1, "individual_action"}}},
		{"single step object", `{"cmd":"open y","exit_code":0}`, "", true, []learnStep{{"open y", 0, "individual_action"}}},
		{"array", `[{"cmd":"open z","exit_code":0,"kind":"individual_action"}]`, "", true, []learnStep{{"open z", 0, "individual_action"}}},
		{"malformed falls back to code", `{"steps":`, "open q", false, []learnStep{{"open q", 1, "individual_action"}}},
		{"no trace, empty code", ``, "", true, nil},
		{"non-string cmd is its JSON", `{"steps":[{"cmd":{"a":1},"exit_code":0}]}`, "", true, []learnStep{{`{"a":1}`, 0, "individual_action"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := learnSteps([]byte(tc.trace), tc.code, tc.success); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("steps %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLearnKeysAndScore: the skill key from the first skill: tag, else browser-<sandbox>; the scenario key from the
// description; Bay's score (a segment of three steps or more passes its default policy).
func TestLearnKeysAndScore(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		tags *string
		want string
	}{
		{nil, "browser-sb-1"}, {s("a, skill:login ,skill:other"), "login"}, {s("skill:"), "browser-sb-1"},
		{s("skill:" + strings.Repeat("k", 300)), strings.Repeat("k", MaxSkillKey)},
	} {
		if got := learnSkillKey(tc.tags, "sb-1"); got != tc.want {
			t.Errorf("learnSkillKey(%v) = %q, want %q", tc.tags, got, tc.want)
		}
	}
	for _, tc := range []struct {
		desc *string
		want *string
	}{
		{nil, nil}, {s("  "), nil}, {s("!!"), nil}, {s("Log in to the Shop!"), s("log-in-to-the-shop")},
		{s("a- b"), s("a--b")}, {s("Été_v1.2"), s("t-_v1.2")}, {s(strings.Repeat("x", 70)), s(strings.Repeat("x", 64))},
	} {
		got := learnScenarioKey(tc.desc)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("learnScenarioKey(%v) = %v, want %v", tc.desc, got, tc.want)
		}
	}
	pol := DefaultLearnPolicy()
	for n, want := range map[int]learnMetrics{
		2: {Score: 0.91, ReplaySuccess: 1, Samples: 20},
		3: {Score: 0.99, ReplaySuccess: 1, Samples: 30},
		5: {Score: 0.99, ReplaySuccess: 1, Samples: 50},
	} {
		got := scoreSegment(make([]learnStep, n))
		if got != want {
			t.Errorf("scoreSegment(%d) = %+v, want %+v", n, got, want)
		}
		passes := got.Score >= pol.ScoreThreshold && got.ReplaySuccess >= pol.ReplaySuccessThreshold && got.Samples >= pol.MinSamples
		if passes != (n >= 3) {
			t.Errorf("a segment of %d steps passes: %v", n, passes)
		}
	}
}

// FuzzLearnSteps: any trace bytes give steps without panicking, each named, and segments only of those steps.
func FuzzLearnSteps(f *testing.F) {
	for _, s := range []string{``, `{`, `[]`, `{"steps":[{"cmd":"open a","exit_code":0},{"cmd":"eval 1","exit_code":"0"}]}`,
		`{"cmd":"x"}`, `[{"cmd":null,"exit_code":1e400}]`, `{"steps":[{"cmd":"a","exit_code":-9.0e18}]}`} {
		f.Add([]byte(s), "open fallback", true)
	}
	f.Fuzz(func(t *testing.T, trace []byte, code string, success bool) {
		steps := learnSteps(trace, code, success)
		for _, st := range steps {
			if st.Cmd == "" || st.Cmd != strings.TrimSpace(st.Cmd) {
				t.Fatalf("step with a blank or untrimmed command: %+v", st)
			}
		}
		n := 0
		for _, seg := range learnSegments(steps) {
			if len(seg) < learnMinSegment {
				t.Fatalf("segment of %d steps", len(seg))
			}
			n += len(seg)
		}
		if n > len(steps) {
			t.Fatalf("segments hold %d steps of %d", n, len(steps))
		}
		if _, err := json.Marshal(steps); err != nil {
			t.Fatal(err)
		}
	})
}
