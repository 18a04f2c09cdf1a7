package e2b

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

func TestParseLogQuery(t *testing.T) {
	for _, tc := range []struct {
		query  string
		v2     bool
		status int
		check  func(LogQuery) bool
	}{
		{"", false, 0, func(q LogQuery) bool { return q.Limit == maxLogLimit && q.Core.Since.IsZero() && !q.Core.Backward }},
		{"start=1700000000123&limit=5", false, 0, func(q LogQuery) bool {
			return q.Limit == 5 && q.Core.Limit == 5 && q.Core.Since.Equal(time.UnixMilli(1700000000123))
		}},
		{"limit=5000", false, 0, func(q LogQuery) bool { return q.Limit == maxLogLimit }}, // v1 has no maximum: capped
		{"limit=5000", true, http.StatusBadRequest, nil},
		{"cursor=1700000000000&direction=backward&limit=3", true, 0, func(q LogQuery) bool {
			return q.Core.Backward && q.Core.Until.Equal(time.UnixMilli(1700000000000)) && q.Core.Since.IsZero() && q.Core.Limit == 3
		}},
		{"level=warn&search=boom", true, 0, func(q LogQuery) bool {
			return q.MinLevel == 2 && q.Search == "boom" && q.Core.Limit == sandboxes.MaxLogLines
		}},
		{"direction=sideways", true, http.StatusBadRequest, nil},
		{"level=loud", true, http.StatusBadRequest, nil},
		{"search=" + strings.Repeat("x", maxLogSearch+1), true, http.StatusBadRequest, nil},
		{"start=-1", false, http.StatusBadRequest, nil},
		{"start=abc", false, http.StatusBadRequest, nil},
		{"cursor=1", false, http.StatusBadRequest, nil}, // v1 names it start
		{"level=info", false, http.StatusBadRequest, nil},
		{"limit=-2", true, http.StatusBadRequest, nil},
	} {
		t.Run(tc.query, func(t *testing.T) {
			v, _ := url.ParseQuery(tc.query)
			q, e := ParseLogQuery(v, tc.v2)
			switch {
			case tc.status != 0 && (e == nil || e.Status != tc.status):
				t.Fatalf("got %+v %v, want %d", q, e, tc.status)
			case tc.status == 0 && (e != nil || !tc.check(q)):
				t.Fatalf("got %+v %v", q, e)
			}
		})
	}
}

func TestLogEntry(t *testing.T) {
	at := time.Date(2026, 11, 29, 11, 41, 36, 0, time.UTC)
	for _, tc := range []struct {
		text, level, msg string
		fields           map[string]string
	}{
		{`{"time":"x","level":"INFO","msg":"agent listening","addr":":7777","n":3}`, "info", "agent listening", map[string]string{"stream": "stderr", "addr": ":7777", "n": "3"}},
		{`{"level":"WARN","msg":"w"}`, "warn", "w", map[string]string{"stream": "stderr"}},
		{`{"level":"ERROR","msg":"e","stream":"forged"}`, "error", "e", map[string]string{"stream": "stderr"}},
		{`{"level":"LOUD","msg":"x"}`, "info", "x", map[string]string{"stream": "stderr"}},
		{`plain output`, "info", "plain output", map[string]string{"stream": "stderr"}},
		{`{not json`, "info", "{not json", map[string]string{"stream": "stderr"}},
	} {
		e := Entry(sandboxes.LogLine{Time: at, Stream: "stderr", Text: tc.text})
		if e.Level != tc.level || e.Message != tc.msg || e.Timestamp != "2026-11-29T11:41:36Z" || len(e.Fields) != len(tc.fields) {
			t.Errorf("%s: %+v", tc.text, e)
			continue
		}
		for k, v := range tc.fields {
			if e.Fields[k] != v {
				t.Errorf("%s: field %s = %q, want %q", tc.text, k, e.Fields[k], v)
			}
		}
	}
}

// FuzzLogEntry: whatever a tenant's process writes to the container's output, reading it as an entry never
// panics, gives one of E2B's levels and at most maxLogFields fields beside the stream.
func FuzzLogEntry(f *testing.F) {
	for _, s := range []string{`{"level":"INFO","msg":"x","a":{"b":[1,2]}}`, "plain", `{"msg":1e999}`, `{}`, `{"level":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		e := Entry(sandboxes.LogLine{Stream: "stdout", Text: text})
		if _, ok := logLevels[e.Level]; !ok {
			t.Fatalf("level %q", e.Level)
		}
		if len(e.Fields) > maxLogFields+1 {
			t.Fatalf("%d fields", len(e.Fields))
		}
	})
}

// FuzzLogQuery: any logs query parses or is refused with a 400, and a parsed one stays inside the bounds.
func FuzzLogQuery(f *testing.F) {
	for _, s := range []string{"cursor=1&limit=10&direction=backward", "start=5", "limit=99999", "level=debug&search=a"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, v2 bool) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, e := ParseLogQuery(v, v2)
		if e != nil {
			if e.Status != http.StatusBadRequest {
				t.Fatalf("%q: status %d", raw, e.Status)
			}
			return
		}
		if q.Limit < 0 || q.Limit > maxLogLimit || q.Core.Limit > sandboxes.MaxLogLines || len(q.Search) > maxLogSearch {
			t.Fatalf("%q: %+v", raw, q)
		}
	})
}
