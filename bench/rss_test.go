package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// rssBoundMB is the stated bound on the gateway's peak RSS growth while 10 sandboxes each answer a Python cell with
// a 200 MB result: each reply keeps at most agentapi.MaxReplyString (4 MiB) of the result, plus the decoded copy and
// the API answer, so 10 concurrent cells need a few tens of MB; 256 MB leaves room for the Go heap's slack.
const rssBoundMB = 256

// BenchmarkGatewayRSSHugeCells measures the gateway's peak resident memory while 10 agents each stream a 200 MB cell
// result to it at once, through the agent client the gateway uses (agentapi.Client) and the JSON answer it writes.
// The agents are hostile stand-ins that generate the bytes as they send them (a sandbox can forge any reply), so
// only the gateway's side is measured. The baseline is what main did before the bound: decoding the reply whole.
// Reported: peak RSS growth in MB for the bounded client and the baseline (measured with 2 cells, scaled to 10),
// and their ratio.
func BenchmarkGatewayRSSHugeCells(b *testing.B) {
	const agents, cellBytes = 10, 200 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, io.MultiReader(strings.NewReader(`{"success":true,"stdout":"","result":"`),
			io.LimitReader(fill('x'), cellBytes), strings.NewReader(`","images":[],"execution_count":1}`)))
	}))
	defer srv.Close()
	run := func(b *testing.B, agents int, cell func(context.Context) (agentapi.KernelExecResult, error)) float64 {
		var peak float64
		for range b.N {
			resetPeakRSS(b)
			base := peakRSSMB(b)
			var wg sync.WaitGroup
			for range agents {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := cell(context.Background())
					if err != nil {
						b.Error(err)
						return
					}
					// The API answers with the result: encode it as the handler does.
					_ = json.NewEncoder(io.Discard).Encode(map[string]any{"output": res.Result, "truncated": res.OutputTruncated})
				}()
			}
			wg.Wait()
			peak = max(peak, peakRSSMB(b)-base)
		}
		return peak
	}
	client := agentapi.NewClient(srv.URL, "t", srv.Client())
	bounded := run(b, agents, func(ctx context.Context) (agentapi.KernelExecResult, error) {
		return client.PythonExec(ctx, agentapi.KernelExecRequest{Code: "'x'*200_000_000"})
	})
	// The baseline runs 2 cells, not 10 (10 would take about 7 GB from a shared machine); it is scaled to 10.
	unbounded := run(b, 2, func(ctx context.Context) (agentapi.KernelExecResult, error) {
		resp, err := srv.Client().Post(srv.URL+"/v1/python/exec", "application/json", strings.NewReader(`{"code":"x"}`))
		if err != nil {
			return agentapi.KernelExecResult{}, err
		}
		defer resp.Body.Close()
		var res agentapi.KernelExecResult
		return res, json.NewDecoder(resp.Body).Decode(&res)
	})
	b.ReportMetric(bounded, "peak-rss-MB")
	unbounded *= agents / 2
	b.ReportMetric(unbounded, "baseline-peak-rss-MB")
	if bounded > 0 {
		b.ReportMetric(unbounded/bounded, "baseline/bounded")
	}
	if bounded > rssBoundMB {
		b.Errorf("peak RSS grew %.0f MB with 10 huge cells, over the stated bound of %d MB", bounded, rssBoundMB)
	}
}

type fill byte

func (f fill) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(f)
	}
	return len(p), nil
}

// resetPeakRSS resets the kernel's high-water mark of this process (Linux: clear_refs 5), after collecting garbage
// so the previous round's heap is not counted.
func resetPeakRSS(b *testing.B) {
	b.Helper()
	freeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// peakRSSMB is VmHWM of this process in MB.
func peakRSSMB(b *testing.B) float64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb / 1024
		}
	}
	b.Fatal(fmt.Errorf("no VmHWM in /proc/self/status"))
	return 0
}

func freeOSMemory() { debug.FreeOSMemory() }
