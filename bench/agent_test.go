// Package bench holds benchmarks that compare sandgate against baselines measured in the same run. They print
// tables and report metrics; they never assert on speed.
package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

var agentOnce sync.Once

// BenchmarkAgent measures, against one sandbox container: exec round trip of `true` through the agent vs
// `docker exec <ctr> true`, the agent's memory idle and under 50 concurrent execs, and PTY echo latency. The
// measurement runs once per process whatever b.N is (it is a fixed workload); metrics are reported every time.
func BenchmarkAgent(b *testing.B) {
	var r agentReport
	agentOnce.Do(func() { r = measureAgent(b); lastReport = r; r.print(os.Stdout) })
	r = lastReport
	b.ReportMetric(ms(r.agentP50), "agent-exec-p50-ms")
	b.ReportMetric(ms(r.dockerP50), "docker-exec-p50-ms")
	b.ReportMetric(float64(r.dockerP50)/float64(r.agentP50), "speedup-x")
	b.ReportMetric(float64(r.rssStartKiB)/1024, "rss-idle-MiB")
	b.ReportMetric(float64(r.rssPeakKiB)/1024, "rss-peak-50-MiB")
	b.ReportMetric(ms(r.ptyP50)*1000, "pty-echo-p50-us")
}

var lastReport agentReport

type agentReport struct {
	agentP50, agentP99, dockerP50, dockerP99 time.Duration
	agentN, dockerN                          int
	rssStartKiB, rssIdleKiB, rssAfterKiB     int
	rssPeakKiB                               int
	concurrentTotal                          time.Duration
	concurrentExecs                          int
	ptyP50, ptyP99                           time.Duration
	ptyN                                     int
}

func measureAgent(b *testing.B) agentReport {
	sb := testenv.RunSandbox(b, testenv.SandboxOptions{Capabilities: []string{"shell"}})
	c := agentapi.NewClient(sb.URL, sb.Token, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var r agentReport
	time.Sleep(time.Second)
	r.rssStartKiB, _ = agentMemory(b, sb.Name)

	execTrue := func() time.Duration {
		start := time.Now()
		res, err := c.Exec(ctx, agentapi.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.Status != agentapi.StatusExited {
			b.Fatalf("agent exec: %+v %v", res, err)
		}
		return time.Since(start)
	}
	for range 20 { // warm up connections and page cache
		execTrue()
	}
	r.agentN = 300
	var agent []time.Duration
	for range r.agentN {
		agent = append(agent, execTrue())
	}
	r.agentP50, r.agentP99 = testenv.Percentile(agent, .5), testenv.Percentile(agent, .99)

	r.dockerN = 30
	var docker []time.Duration
	for range r.dockerN {
		start := time.Now()
		if out, err := exec.Command("docker", "exec", sb.Name, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v %s", err, out)
		}
		docker = append(docker, time.Since(start))
	}
	r.dockerP50, r.dockerP99 = testenv.Percentile(docker, .5), testenv.Percentile(docker, .99)

	time.Sleep(time.Second)
	r.rssIdleKiB, _ = agentMemory(b, sb.Name)

	// 50 clients at once, each running 10 execs back to back
	r.concurrentExecs = 50 * 10
	start := time.Now()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				execTrue()
			}
		}()
	}
	wg.Wait()
	r.concurrentTotal = time.Since(start)
	r.rssAfterKiB, r.rssPeakKiB = agentMemory(b, sb.Name)

	r.ptyN = 200
	r.ptyP50, r.ptyP99 = ptyEcho(b, ctx, c, sb.Token, r.ptyN)
	return r
}

// agentMemory reads the agent's VmRSS and VmHWM (peak) in KiB from /proc inside the container.
func agentMemory(b *testing.B, ctr string) (rss, hwm int) {
	out, err := exec.Command("docker", "exec", ctr, "sh", "-c", "cat /proc/$(pgrep -xo sandgate-agent)/status").CombinedOutput()
	if err != nil {
		b.Fatalf("reading agent memory: %v %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			hwm = n
		}
	}
	return rss, hwm
}

// ptyEcho times a keystroke's round trip: stdin frame in, the terminal's echo out.
func ptyEcho(b *testing.B, ctx context.Context, c *agentapi.Client, token string, n int) (time.Duration, time.Duration) {
	s, err := c.CreatePTY(ctx, agentapi.PTYCreateRequest{Argv: []string{"cat"}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.DeletePTY(ctx, s.ID)
	conn, _, err := websocket.Dial(ctx, c.PTYWebSocketURL(s.ID, 0, false), &websocket.DialOptions{HTTPHeader: http.Header{agentapi.TokenHeader: {token}}})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.CloseNow()
	if _, _, err := conn.Read(ctx); err != nil { // connected
		b.Fatal(err)
	}
	var lat []time.Duration
	for i := range n + 10 {
		key := byte('a' + i%26)
		start := time.Now()
		if err := conn.Write(ctx, websocket.MessageBinary, []byte{agentapi.PTYChannelStdin, key}); err != nil {
			b.Fatal(err)
		}
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if typ == websocket.MessageBinary && len(data) > 1 && data[0] == agentapi.PTYChannelStdout && data[len(data)-1] == key {
				break
			}
		}
		if i >= 10 {
			lat = append(lat, time.Since(start))
		}
	}
	return testenv.Percentile(lat, .5), testenv.Percentile(lat, .99)
}

func (r agentReport) print(w *os.File) {
	fmt.Fprintf(w, "\nsandgate agent vs docker exec (same container, same run)\n")
	fmt.Fprintf(w, "%-44s %12s %12s %10s\n", "measure", "p50", "p99", "n")
	fmt.Fprintf(w, "%-44s %12s %12s %10d\n", "docker exec <ctr> true (baseline)", r.dockerP50.Round(time.Microsecond), r.dockerP99.Round(time.Microsecond), r.dockerN)
	fmt.Fprintf(w, "%-44s %12s %12s %10d\n", "agent POST /v1/exec argv [true]", r.agentP50.Round(time.Microsecond), r.agentP99.Round(time.Microsecond), r.agentN)
	fmt.Fprintf(w, "%-44s %11.1fx %11.1fx %10s   (target >= 10x)\n", "speedup (docker / agent)", float64(r.dockerP50)/float64(r.agentP50), float64(r.dockerP99)/float64(r.agentP99), "")
	fmt.Fprintf(w, "%-44s %12s %12s %10d\n", "PTY echo (stdin frame -> echoed byte)", r.ptyP50.Round(time.Microsecond), r.ptyP99.Round(time.Microsecond), r.ptyN)
	fmt.Fprintf(w, "%-44s %12s %12s %10d   (%.0f execs/s)\n", "50 concurrent clients x 10 execs, total", r.concurrentTotal.Round(time.Millisecond), "", r.concurrentExecs,
		float64(r.concurrentExecs)/r.concurrentTotal.Seconds())
	fmt.Fprintf(w, "%-44s %10.1f MiB   (target < 15 MiB)\n", "agent RSS idle after start", float64(r.rssStartKiB)/1024)
	fmt.Fprintf(w, "%-44s %10.1f MiB\n", "agent RSS idle after 320 sequential execs", float64(r.rssIdleKiB)/1024)
	fmt.Fprintf(w, "%-44s %10.1f MiB\n", "agent RSS after 50 concurrent", float64(r.rssAfterKiB)/1024)
	fmt.Fprintf(w, "%-44s %10.1f MiB\n\n", "agent peak RSS (VmHWM) incl. 50 concurrent", float64(r.rssPeakKiB)/1024)
}
