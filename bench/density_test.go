package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// BenchmarkDensity grows one Manager to 10, 100 and 300 idle sandboxes of the base image (SANDGATE_DENSITY_SIZES
// overrides, e.g. "10,30") and reports at each size: the host memory of one idle sandbox (its cgroup's usage less
// its inactive page cache, the working set `docker stats` shows), List, Get and first-exec latencies (p50), one
// collector pass, and this process's RSS (the gateway's Manager lives in it). The ratios compare each size with
// the first, measured in the same run.
//
//	SANDGATE_DENSITY_SIZES=10,100,300 go test -run x -bench Density -benchtime 1x -timeout 2h ./bench
func BenchmarkDensity(b *testing.B) {
	sizes := []int{10, 100, 300}
	if s := os.Getenv("SANDGATE_DENSITY_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("SANDGATE_DENSITY_SIZES: %q", s)
			}
			sizes = append(sizes, n)
		}
	}
	ctx := context.Background()
	image := testenv.Image(b, "base")
	ns := testenv.Unique("sgd")
	testenv.RemoveNamespace(b, ns)
	drv, err := docker.New("")
	if err != nil {
		b.Fatal(err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: ns}, drv,
		sandboxes.NewBoltStore(filepath.Join(b.TempDir(), "store.db")), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	p := benchProfile("dense")
	p.Image = image
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour, OrphanMinAge: time.Hour,
		StartTimeout: 5 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mgr.Close() })

	var ids []string
	var targets []sandboxes.Target
	type row struct {
		n                        int
		memMB                    float64
		list, get, exec, gc, rss float64
	}
	var rows []row
	for _, n := range sizes {
		// Grow to n, a few creates at a time (the engine sets the pace).
		for len(ids) < n {
			batch := min(8, n-len(ids))
			var wg sync.WaitGroup
			var mu sync.Mutex
			for range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: "dense"})
					if err != nil {
						b.Error(err)
						return
					}
					rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
					defer cancel()
					t, err := mgr.EnsureRunning(rctx, sb.ID)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					ids = append(ids, sb.ID)
					targets = append(targets, t)
					mu.Unlock()
				}()
			}
			wg.Wait()
			if b.Failed() {
				b.FailNow()
			}
		}
		r := row{n: n}
		// Memory of up to 20 sandboxes spread over the set.
		var sum float64
		var counted int
		for i := 0; i < len(ids); i += max(1, len(ids)/20) {
			info, err := cli.ContainerInspect(ctx, mgr.ContainerName(ids[i]))
			if err != nil {
				b.Fatal(err)
			}
			if mb, ok := cgroupWorkingSetMB(info.ID); ok {
				sum += mb
				counted++
			}
		}
		if counted > 0 {
			r.memMB = sum / float64(counted)
		}
		r.list = p50(20, func() {
			if _, _, err := mgr.List(ctx, sandboxes.ListOptions{Limit: 1000}); err != nil {
				b.Fatal(err)
			}
		})
		i := 0
		r.get = p50(50, func() {
			i++
			if _, err := mgr.Get(ctx, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
		})
		r.exec = p50(20, func() {
			i++
			t := targets[i%len(targets)]
			res, err := agentapi.NewClientFor(t.Addr, t.Token, mgr.AgentHTTPClient()).Exec(ctx, agentapi.ExecRequest{Argv: []string{"true"}})
			if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				b.Fatalf("exec: %v %+v", err, res)
			}
		})
		r.gc = p50(1, func() { mgr.CollectGarbage(ctx) })
		r.rss = selfRSSMB()
		rows = append(rows, r)
		b.Logf("%d sandboxes: %.1f MB per idle sandbox (cgroup working set); list p50 %.3f ms, get p50 %.4f ms, exec p50 %.2f ms, "+
			"one GC pass %.0f ms; process RSS %.0f MB", n, r.memMB, r.list, r.get, r.exec, r.gc, r.rss)
	}
	first, last := rows[0], rows[len(rows)-1]
	for _, m := range []struct {
		name string
		a, z float64
	}{{"list", first.list, last.list}, {"get", first.get, last.get}, {"exec", first.exec, last.exec}, {"gc", first.gc, last.gc}} {
		b.ReportMetric(m.z/m.a, fmt.Sprintf("%s-%dto%d", m.name, first.n, last.n))
	}
	b.ReportMetric(last.memMB, "MB/sandbox")
	b.Logf("from %d to %d sandboxes: list %.2fx, get %.2fx, exec %.2fx, GC pass %.2fx (target: none over 2x)",
		first.n, last.n, last.list/first.list, last.get/first.get, last.exec/first.exec, last.gc/first.gc)
	for _, id := range ids {
		_ = mgr.Delete(ctx, id)
	}
}

// p50 runs f n times and returns the median in milliseconds.
func p50(n int, f func()) float64 {
	var d []time.Duration
	for range n {
		start := time.Now()
		f()
		d = append(d, time.Since(start))
	}
	return float64(testenv.Percentile(d, .5)) / float64(time.Millisecond) // ns resolution: a Get takes microseconds
}

// cgroupWorkingSetMB reads a container's memory cgroup (v1, cgroupfs driver, as on our engines; v2 as a fallback):
// usage less inactive file pages, which is what `docker stats` reports.
func cgroupWorkingSetMB(id string) (float64, bool) {
	for _, dir := range []string{"/sys/fs/cgroup/memory/docker/" + id, "/sys/fs/cgroup/system.slice/docker-" + id + ".scope"} {
		usage, err := readCgroupInt(dir, "memory.usage_in_bytes", "memory.current")
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(dir, "memory.stat"))
		var inactive int64
		for _, line := range strings.Split(string(stat), "\n") {
			k, v, _ := strings.Cut(line, " ")
			if k == "total_inactive_file" || k == "inactive_file" {
				inactive, _ = strconv.ParseInt(v, 10, 64)
				break
			}
		}
		return float64(usage-inactive) / (1 << 20), true
	}
	return 0, false
}

func readCgroupInt(dir string, names ...string) (int64, error) {
	var last error
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			last = err
			continue
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	return 0, last
}

// selfRSSMB is this process's resident set in MB.
func selfRSSMB() float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
