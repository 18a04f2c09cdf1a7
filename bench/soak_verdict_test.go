package bench

import (
	"strings"
	"testing"
)

// TestParseMetrics: the three process figures come out of a Prometheus exposition; a missing one is an error, not
// a zero that would pass for flat.
func TestParseMetrics(t *testing.T) {
	const text = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_gc_duration_seconds{quantile="0"} 1e-05
process_open_fds 17
process_resident_memory_bytes 1.048576e+08
`
	m, err := parseMetrics(strings.NewReader(text), "go_goroutines", "process_open_fds", "process_resident_memory_bytes")
	if err != nil || m["go_goroutines"] != 42 || m["process_open_fds"] != 17 || m["process_resident_memory_bytes"] != 100<<20 {
		t.Fatalf("parsed %v %v", m, err)
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines 3\n"), "go_goroutines", "process_open_fds"); err == nil {
		t.Fatal("a missing metric was not an error")
	}
}

// TestSoakVerdict: the pass rule of the soak, case by case.
func TestSoakVerdict(t *testing.T) {
	start := soakSample{Label: "start", RSSMiB: 90, Goroutines: 33, FDs: 15, Networks: 1, Rules: 10}
	ref := soakSample{Label: "t+5m", RSSMiB: 120, Goroutines: 60, FDs: 30, Containers: 6, Volumes: 6, Networks: 1, Rules: 10}
	end := soakSample{Label: "end", RSSMiB: 125, Goroutines: 30, FDs: 14, Networks: 1, Rules: 10}
	for _, tt := range []struct {
		name     string
		change   func(loaded, end *soakSample)
		failures int
		want     string // a fragment of the one complaint; empty for a pass
	}{
		{name: "flat", change: func(*soakSample, *soakSample) {}},
		{name: "an error", change: func(*soakSample, *soakSample) {}, failures: 1, want: "1 errors"},
		{name: "a volume left", change: func(_, e *soakSample) { e.Volumes = 1 }, want: "containers/volumes/networks/rules"},
		{name: "a rule left", change: func(_, e *soakSample) { e.Rules = 11 }, want: "containers/volumes/networks/rules"},
		{name: "goroutines grew", change: func(_, e *soakSample) { e.Goroutines = start.Goroutines + soakGoroutineSlack + 1 }, want: "goroutines"},
		{name: "fds grew", change: func(_, e *soakSample) { e.FDs = start.FDs + soakFDSlack + 1 }, want: "open fds"},
		{name: "RSS grew under load", change: func(l, _ *soakSample) { l.RSSMiB = 1.5*ref.RSSMiB + 65 }, want: "RSS"},
		{name: "RSS wobble", change: func(l, _ *soakSample) { l.RSSMiB = 1.5*ref.RSSMiB + 63 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			loaded, e := ref, end
			loaded.Label = "t+10m"
			tt.change(&loaded, &e)
			bad := soakVerdict(start, ref, []soakSample{loaded}, e, tt.failures)
			switch {
			case tt.want == "" && len(bad) > 0:
				t.Fatalf("failed: %v", bad)
			case tt.want != "" && (len(bad) != 1 || !strings.Contains(bad[0], tt.want)):
				t.Fatalf("want one complaint about %q, got %v", tt.want, bad)
			}
		})
	}
}
