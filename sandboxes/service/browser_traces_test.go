package service

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestBuildBrowserTrace pins Bay's two trace shapes and the bound on tenant text.
func TestBuildBrowserTrace(t *testing.T) {
	ms := int64(7)
	big := strings.Repeat("\x00\"é", sandboxes.MaxTraceBytes) // escapes to several times its size
	tests := []struct {
		name      string
		run       BrowserRun
		kind      string
		steps     int
		truncated bool
		batch     bool
	}{
		{"one exec", BrowserRun{Commands: []string{"open x"}, Steps: []BrowserStep{{Cmd: "open x", Stdout: "x\n"}}, Success: true}, TraceKindExec, 1, false, false},
		{"a batch that stopped", BrowserRun{Batch: true, Commands: []string{"a", "b", "c"}, Steps: []BrowserStep{{Cmd: "a", DurationMS: &ms}, {Cmd: "b", ExitCode: 127}},
			Elapsed: time.Second}, TraceKindBatch, 2, false, true},
		{"a huge page", BrowserRun{Commands: []string{"get text"}, Steps: []BrowserStep{{Cmd: "get text", Stdout: big, Stderr: big}}}, TraceKindExec, 1, true, false},
		{"many huge steps", BrowserRun{Batch: true, Steps: manySteps(5000, big[:1000])}, TraceKindBatch, -1, true, true},
		{"a batch with no step run", BrowserRun{Batch: true, Commands: []string{"a"}}, TraceKindBatch, 0, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := BuildBrowserTrace(tc.run)
			if len(b) > sandboxes.MaxTraceBytes {
				t.Fatalf("%d bytes", len(b))
			}
			var doc traceDoc
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Kind != tc.kind || (tc.steps >= 0 && len(doc.Steps) != tc.steps) || doc.Truncated != tc.truncated || doc.Steps == nil {
				t.Fatalf("kind %s, %d steps, truncated %v", doc.Kind, len(doc.Steps), doc.Truncated)
			}
			if tc.batch != (doc.TotalSteps != nil) {
				t.Fatalf("batch fields: %s", b[:min(len(b), 300)])
			}
			if tc.batch && (*doc.TotalSteps != len(tc.run.Commands) || *doc.CompletedSteps != len(tc.run.Steps)) {
				t.Errorf("counts: %d/%d", *doc.CompletedSteps, *doc.TotalSteps)
			}
			for i, s := range doc.Steps {
				if s.StepIndex != i || s.Kind != "individual_action" || (tc.batch != (s.DurationMS != nil)) {
					t.Errorf("step %d: %+v", i, s)
				}
			}
		})
	}
}

func manySteps(n int, text string) []BrowserStep {
	out := make([]BrowserStep, n)
	for i := range out {
		out[i] = BrowserStep{Cmd: text, Stdout: text, Stderr: text}
	}
	return out
}

// TestParseTraceRef: Bay's answers to a caller's ref: not blob: is validation_error, blob: alone too, anything else
// goes to the lookup.
func TestParseTraceRef(t *testing.T) {
	for ref, code := range map[string]string{"blob:blob-0123456789ab": "", "blob:missing-trace": "", "nope": CodeValidation, "": CodeValidation,
		"blob:": CodeValidation, "BLOB:x": CodeValidation, strings.Repeat("x", 10000): CodeValidation} {
		err := ParseTraceRef(ref)
		if got := ""; err != nil {
			got = AsError(err).Code
			if got != code || len(AsError(err).Message) > 200 {
				t.Errorf("%.20q: %v, want %s", ref, err, code)
			}
		} else if code != "" {
			t.Errorf("%.20q accepted", ref)
		}
	}
}

// FuzzBrowserTrace: whatever a page, a script or a command holds (tenant text, any bytes, any number of steps), the
// trace kept of it is a JSON object of Bay's kind, at most sandboxes.MaxTraceBytes, whose step texts are each a
// prefix of what ran, in order.
func FuzzBrowserTrace(f *testing.F) {
	f.Add("open about:blank", "about:blank\n", "", 0, uint16(1), false)
	f.Add("get text", strings.Repeat("\x00é\"<\xff", 1000), "err", 127, uint16(300), true)
	f.Add("", "", "", -1, uint16(0), true)
	f.Fuzz(func(t *testing.T, cmd, stdout, stderr string, exit int, n uint16, batch bool) {
		// Repeat stdout to sizes past the bound (at most 1 MiB, shared by every step) without making the fuzzer
		// build them.
		scale := 1 + int(n%64)*int(n%64)
		if len(stdout)*scale > 1<<20 {
			scale = 1<<20/(len(stdout)+1) + 1
		}
		big := strings.Repeat(stdout, scale)
		steps := make([]BrowserStep, int(n%512))
		for i := range steps {
			steps[i] = BrowserStep{Cmd: cmd, Stdout: big, Stderr: stderr, ExitCode: exit}
		}
		run := BrowserRun{Batch: batch, Commands: []string{cmd}, Steps: steps, Success: exit == 0}
		b := BuildBrowserTrace(run)
		if len(b) > sandboxes.MaxTraceBytes {
			t.Fatalf("%d bytes", len(b))
		}
		var doc traceDoc
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		want := TraceKindExec
		if batch {
			want = TraceKindBatch
		}
		if doc.Kind != want || len(doc.Steps) > len(steps) || doc.Steps == nil {
			t.Fatalf("kind %s, %d of %d steps", doc.Kind, len(doc.Steps), len(steps))
		}
		// JSON turns invalid UTF-8 into U+FFFD, so compare with what it makes of the original.
		wantOut, wantCmd := validUTF8(big), validUTF8(cmd)
		for i, s := range doc.Steps {
			if !strings.HasPrefix(wantOut, s.Stdout) || !strings.HasPrefix(wantCmd, s.Cmd) || s.ExitCode != exit || s.StepIndex != i {
				t.Fatalf("step %d is not a prefix of what ran", i)
			}
		}
	})
}

// validUTF8 is s as encoding/json writes it: each byte of an invalid sequence becomes U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for _, r := range s { // ranging over a string yields U+FFFD for each invalid byte
		b.WriteRune(r)
	}
	return b.String()
}

// FuzzParseTraceRef: a caller's trace ref (a URL path segment) is accepted exactly when it is Bay's blob: scheme
// with something after it; anything else is validation_error, with the ref echoed at most clipped.
func FuzzParseTraceRef(f *testing.F) {
	for _, s := range []string{"blob:blob-0123456789ab", "blob:", "", "nope", "blob:\x00", "BLOB:x", strings.Repeat("é", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		err := ParseTraceRef(ref)
		ok := strings.HasPrefix(ref, TraceRefPrefix) && len(ref) > len(TraceRefPrefix)
		if (err == nil) != ok {
			t.Fatalf("%q: %v", ref, err)
		}
		if err != nil && (AsError(err).Code != CodeValidation || len(AsError(err).Message) > 200) {
			t.Fatalf("%q: %v", ref, err)
		}
	})
}
