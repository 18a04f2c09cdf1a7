package service

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// BenchmarkLearnIdlePass is the cost of a learning pass with nothing to learn over learnBenchSandboxes sandboxes
// whose histories are full (sandboxes.MaxHistoryEntries entries each, every run already learned): through the
// learn queue, against the baseline measured in the same run, the pass reading every sandbox's whole history (the
// pass before the queue). It reports both per pass, their ratio, and the history entries each pass decodes.
func BenchmarkLearnIdlePass(b *testing.B) {
	const learnBenchSandboxes = 50
	ctx := context.Background()
	st := sandboxes.NewBoltStore(filepath.Join(b.TempDir(), "s.db"))
	defer st.Close()
	core, _ := sandboxestest.NewManager(b, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img"}}})
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	processed := LearnProcessed
	for i := range learnBenchSandboxes {
		sb, err := core.Create(ctx, sandboxes.CreateRequest{Profile: "base", Owner: fmt.Sprintf("owner-%d", i%10)})
		if err != nil {
			b.Fatal(err)
		}
		for j := range sandboxes.MaxHistoryEntries {
			e := &sandboxes.HistoryEntry{ID: fmt.Sprintf("exec-%03d-%04d", i, j), SandboxID: sb.ID, ExecType: "shell", Code: "echo hello",
				Success: true, CreatedAt: at}
			if j%10 == 0 { // a browser run learned long ago
				e.ExecType, e.LearnEnabled, e.LearnStatus = "browser_batch", true, &processed
			}
			if err := st.AddHistory(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	queued := New(Config{Sandboxes: core, History: st, Skills: st})
	scanned := New(Config{Sandboxes: core, History: scanOnly{st}, Skills: st})
	pass := func(svc *Service) (time.Duration, uint64) {
		before, start := st.HistoryEntriesRead(), time.Now()
		if res, err := svc.LearnBrowserRuns(ctx, DefaultLearnPolicy()); err != nil || res != (LearnResult{}) {
			b.Fatalf("idle pass %+v %v", res, err)
		}
		return time.Since(start), st.HistoryEntriesRead() - before
	}
	pass(scanned) // the history queue drained, the file's pages read once
	var scanT, queueT time.Duration
	var scanRead, queueRead uint64
	n := 0
	for b.Loop() {
		d, r := pass(scanned)
		scanT, scanRead = scanT+d, scanRead+r
		d, r = pass(queued)
		queueT, queueRead = queueT+d, queueRead+r
		n++
	}
	perScan, perQueue := scanT/time.Duration(n), queueT/time.Duration(n)
	b.ReportMetric(float64(perScan.Microseconds()), "scan-us/pass")
	b.ReportMetric(float64(perQueue.Nanoseconds())/1e3, "queue-us/pass")
	b.ReportMetric(float64(perScan)/float64(max(perQueue, 1)), "scan/queue")
	b.ReportMetric(float64(scanRead)/float64(n), "scan-entries/pass")
	b.ReportMetric(float64(queueRead)/float64(n), "queue-entries/pass")
	b.Logf("idle pass over %d sandboxes x %d entries: reading every history %v (%.0f entries), through the learn queue %v (%.0f entries): %.0fx",
		learnBenchSandboxes, sandboxes.MaxHistoryEntries, perScan, float64(scanRead)/float64(n), perQueue, float64(queueRead)/float64(n),
		float64(perScan)/float64(max(perQueue, 1)))
}
