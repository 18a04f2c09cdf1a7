package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	sgclient "github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// BenchmarkDensity reports, in one run, what idle sandboxes cost the host and whether the gateway stays
// responsive as they add up:
//   - the host memory of one idle sandbox of each image (base, node, r, browser; SANDGATE_DENSITY_IMAGES
//     overrides), read from its memory cgroup (usage less inactive file pages, the working set `docker stats`
//     shows), not estimated;
//   - at 10, 100 and 300 idle sandboxes of the base profile (SANDGATE_DENSITY_SIZES overrides, e.g. "10,30"):
//     list (a page of 10 at every size, and the default page of 50), get and exec (`true` through shell/exec) p50
//     through the REST API (the bayapi handler over HTTP on loopback, beside the Manager as the gateway has it),
//     the same exec straight to the agents (what the host's process start costs, without the API),
//     one collector pass (the orphan sweep not due: it runs once per orphan_min_age), one pass with the sweep and,
//     beside it, the engine's container and volume listings the sweep asks for, the delivery of one
//     lifecycle event to a subscriber (what the console's live stream waits on), the console's live list (the
//     Manager calls its list makes: a 500 page and the usage of its running sandboxes), and this process's RSS
//     (the gateway's Manager and API live in it);
//   - each latency's ratio from the first size to the last, measured in the same run (target: none over 2x).
//
// Each size is measured once the host is quiet again after its creates (CPUs 80% idle over a second, or five
// minutes passed), and the idle share and load average then are printed beside it.
//
// Sandboxes are created 4 at a time (SANDGATE_DENSITY_CONCURRENCY), so a busy engine is not flooded, and all of
// them are deleted at the end, also when the run fails.
//
//	SANDGATE_IMAGE_REPO=sandgate-density/sandbox go test -run x -bench 'BenchmarkDensity$' -benchtime 1x -timeout 3h ./bench
func BenchmarkDensity(b *testing.B) {
	sizes := envInts(b, "SANDGATE_DENSITY_SIZES", []int{10, 100, 300})
	conc := envInts(b, "SANDGATE_DENSITY_CONCURRENCY", []int{4})[0]
	images := []string{"base", "node", "r", "browser"}
	if s := os.Getenv("SANDGATE_DENSITY_IMAGES"); s != "" {
		images = strings.Split(s, ",")
	}
	ctx := context.Background()
	d := newDensityRig(b, images)

	// Host memory per idle sandbox, per image: one sandbox each, sampled once it is ready and again until two
	// samples in a row agree within 5% (the agent and the image's services settle after start).
	for _, img := range images {
		id, _ := d.grow(ctx, b, "img-"+img)
		mb := d.settledMemoryMB(ctx, b, id)
		sayf(b, "image %s: %.1f MB per idle sandbox (cgroup working set; capabilities %v)", img, mb, d.profiles["img-"+img].Capabilities)
		b.ReportMetric(mb, "MB/idle-"+img)
		d.delete(ctx, b, id)
	}

	type row struct {
		n                                                                              int
		memMB, rssMB                                                                   float64
		idle, load                                                                     float64
		list, list50, get, exec, agentExec, gc, sweep, engineList, event, console, all float64
	}
	var rows []row
	var ids []string
	var targets []sandboxes.Target
	var mu sync.Mutex
	for _, n := range sizes {
		for len(ids) < n {
			batch := min(conc, n-len(ids))
			var wg sync.WaitGroup
			for range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id, t := d.grow(ctx, b, "dense")
					mu.Lock()
					ids = append(ids, id)
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
		var sum float64
		var counted int
		for i := 0; i < len(ids); i += max(1, len(ids)/20) {
			if mb, ok := d.memoryMB(ctx, ids[i]); ok {
				sum += mb
				counted++
			}
		}
		if counted > 0 {
			r.memMB = sum / float64(counted)
		}
		// The creates leave the host busy for a while (the engine's and the new agents' start-up): every size is
		// measured once the host is quiet again, so each shows what n idle sandboxes cost, not what n creates did.
		r.idle, r.load = waitQuiet(b)
		// The same page of 10 at every size shows what n costs a list; the default page of 50 also grows with
		// what it carries (five times the items at 300 as at 10).
		r.list = d.listPage(ctx, b, 10, n)
		r.list50 = d.listPage(ctx, b, 50, n)
		i := 0
		r.get = p50(50, func() {
			i++
			if _, err := d.api.GetSandbox(ctx, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
		})
		r.exec = p50(20, func() {
			i++
			res, err := d.api.Shell(ctx, ids[i%len(ids)], "true", 60)
			if err != nil || !res.Success {
				b.Fatalf("exec: %v %+v", err, res)
			}
		})
		// The same command straight to the agents (the gateway's pooled connections, no API, no history): what
		// exec costs the host, so the API's share of any growth is the difference.
		agents := service.NewAgentClient(d.mgr.AgentHTTPClient())
		r.agentExec = p50(20, func() {
			i++
			res, err := agents.Exec(ctx, targets[i%len(targets)], service.ExecRequest{Command: "true", Timeout: time.Minute})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec at the agent: %v %+v", err, res)
			}
		})
		r.gc = p50(5, func() {
			if rep := d.mgr.CollectGarbage(ctx); rep.Errors != 0 || rep.Swept {
				b.Fatalf("collector pass (the sweep not due): %+v", rep)
			}
		})
		r.sweep = p50(3, func() {
			if rep := d.mgr.SweepOrphans(ctx); rep.Errors != 0 || !rep.Swept {
				b.Fatalf("collector pass with the orphan sweep: %+v", rep)
			}
		})
		// The engine's part of a sweep: its listings (every container and workspace volume of the namespace), asked
		// of the engine directly.
		r.engineList = p50(3, func() {
			f := filters.NewArgs(filters.Arg("label", d.ns+".managed=true"))
			if _, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err != nil {
				b.Fatal(err)
			}
			if _, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: f}); err != nil {
				b.Fatal(err)
			}
		})
		r.event = d.eventDelivery(ctx, b, ids[len(ids)/2], 5)
		r.console = p50(5, func() {
			list, _, err := d.mgr.List(ctx, sandboxes.ListOptions{Limit: 500})
			if err != nil {
				b.Fatal(err)
			}
			var ready []string
			for _, sb := range list {
				if sb.Status == sandboxes.StatusReady {
					ready = append(ready, sb.ID)
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second) // the console's own bound
			d.mgr.Usage(cctx, ready)
			cancel()
		})
		r.all = p50(5, func() {
			if _, _, err := d.mgr.List(ctx, sandboxes.ListOptions{Limit: 1000}); err != nil {
				b.Fatal(err)
			}
		})
		runtime.GC()
		r.rssMB = selfRSSMB()
		rows = append(rows, r)
		sayf(b, "%d sandboxes (measured with the host %.0f%% idle, load average %.1f): %.1f MB per idle sandbox; API list p50 %.2f ms (page of 10), %.2f ms (page of 50), API get p50 %.2f ms, "+
			"API exec p50 %.1f ms (the same at the agent %.1f ms), one collector pass p50 %.1f µs, with the orphan sweep %.1f ms (the engine's container and volume listings alone %.1f ms), "+
			"event delivery p50 %.3f ms, console live list p50 %.1f ms, Manager list of all p50 %.3f ms; process RSS %.0f MB",
			n, 100*r.idle, r.load, r.memMB, r.list, r.list50, r.get, r.exec, r.agentExec, 1000*r.gc, r.sweep, r.engineList, r.event, r.console, r.all, r.rssMB)
	}
	first, last := rows[0], rows[len(rows)-1]
	var summary []string
	for _, m := range []struct {
		name string
		a, z float64
	}{{"list", first.list, last.list}, {"list-50", first.list50, last.list50}, {"get", first.get, last.get},
		{"exec", first.exec, last.exec}, {"agent-exec", first.agentExec, last.agentExec}, {"gc", first.gc, last.gc}, {"sweep", first.sweep, last.sweep}, {"engine-list", first.engineList, last.engineList},
		{"event", first.event, last.event}, {"console", first.console, last.console}, {"list-all", first.all, last.all}} {
		b.ReportMetric(m.z/m.a, fmt.Sprintf("%s-%dto%d", m.name, first.n, last.n))
		summary = append(summary, fmt.Sprintf("%s %.2fx", m.name, m.z/m.a))
	}
	b.ReportMetric(last.memMB, "MB/sandbox")
	b.ReportMetric(last.rssMB, "gateway-RSS-MB")
	sayf(b, "from %d to %d sandboxes: %s (target: none over 2x); RSS %.0f -> %.0f MB", first.n, last.n,
		strings.Join(summary, ", "), first.rssMB, last.rssMB)
}

// densityRig is a Manager with the REST API in front of it, as the gateway wires them, on loopback.
type densityRig struct {
	ns       string // the Manager's label namespace
	mgr      *sandboxes.Manager
	cli      *client.Client
	api      *sgclient.Client
	profiles map[string]sandboxes.Profile
	mu       sync.Mutex
	live     map[string]bool
}

func newDensityRig(b *testing.B, images []string) *densityRig {
	ctx := context.Background()
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
	st := sandboxes.NewBoltStore(filepath.Join(b.TempDir(), "store.db"))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: ns}, drv, st, logger)
	if err != nil {
		b.Fatal(err)
	}
	d := &densityRig{ns: ns, mgr: mgr, cli: cli, profiles: map[string]sandboxes.Profile{}, live: map[string]bool{}}
	dense := benchProfile("dense")
	dense.Image = testenv.Image(b, "base")
	d.profiles["dense"] = dense
	for _, img := range images {
		p := benchProfile("img-" + img)
		p.Image = testenv.Image(b, img)
		switch img {
		case "node":
			p.Capabilities = append(p.Capabilities, sandboxes.CapNode)
		case "r":
			p.Capabilities = append(p.Capabilities, sandboxes.CapR)
		case "browser":
			// The browser capability starts Xvfb, Chromium and the VNC server: what an idle browser sandbox holds.
			p.Capabilities = append(p.Capabilities, sandboxes.CapBrowser, sandboxes.CapVNC)
			p.Resources.Memory = "1g"
			p.Resources.Pids = 512
			p.Resources.CPUs = 1
		}
		d.profiles[p.ID] = p
	}
	var ps []sandboxes.Profile
	for _, p := range d.profiles {
		ps = append(ps, p)
	}
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: ps, GCInterval: time.Hour, OrphanMinAge: time.Hour,
		StartTimeout: 5 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	const key = "sk-density-bench"
	keys, err := service.NewKeyRing([]service.KeyConfig{{Key: key, Owner: service.DefaultOwner, Admin: true}})
	if err != nil {
		b.Fatal(err)
	}
	agents := service.NewAgentClient(mgr.AgentHTTPClient())
	svc := service.New(service.Config{Sandboxes: mgr, Agent: agents, Streamer: agents, History: st,
		ManagedWorkspace: bayapi.ManagedCargo(), Exports: st, Fetch: bayapi.FetchPublic, Logger: logger})
	srv := httptest.NewServer(bayapi.New(bayapi.Config{Service: svc, Keys: keys, Version: "bench", Logger: logger}))
	d.api = sgclient.New(srv.URL, key)
	b.Cleanup(func() {
		// Everything this run made goes, also after a failure: no sandbox, volume or network is left behind.
		d.mu.Lock()
		left := make([]string, 0, len(d.live))
		for id := range d.live {
			left = append(left, id)
		}
		d.mu.Unlock()
		deleteSandboxes(ctx, b, mgr, left, 4)
		srv.Close()
		mgr.Close()
		st.Close()
		cli.Close()
	})
	return d
}

// listPage is the p50 of 20 reads of the first page of limit sandboxes through the API, with n sandboxes in all.
func (d *densityRig) listPage(ctx context.Context, b *testing.B, limit, n int) float64 {
	return p50(20, func() {
		var page struct {
			Items []map[string]any `json:"items"`
		}
		err := d.api.Do(ctx, "GET", "/v1/sandboxes?limit="+strconv.Itoa(limit), nil, &page)
		if err != nil || len(page.Items) != min(n, limit) {
			b.Fatalf("list: %v (%d items)", err, len(page.Items))
		}
	})
}

// grow creates one sandbox of the profile, owned as the API key's owner, and waits until its agent answers.
func (d *densityRig) grow(ctx context.Context, b *testing.B, profile string) (string, sandboxes.Target) {
	sb, err := d.mgr.Create(ctx, sandboxes.CreateRequest{Profile: profile, Owner: service.DefaultOwner})
	if err != nil {
		b.Errorf("creating a %s sandbox: %v", profile, err)
		return "", sandboxes.Target{}
	}
	d.mu.Lock()
	d.live[sb.ID] = true
	d.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t, err := d.mgr.EnsureRunning(rctx, sb.ID)
	if err != nil {
		b.Errorf("starting %s: %v", sb.ID, err)
	}
	return sb.ID, t
}

func (d *densityRig) delete(ctx context.Context, b *testing.B, id string) {
	if err := d.mgr.Delete(ctx, id); err != nil {
		b.Fatalf("deleting %s: %v", id, err)
	}
	d.mu.Lock()
	delete(d.live, id)
	d.mu.Unlock()
}

func (d *densityRig) memoryMB(ctx context.Context, id string) (float64, bool) {
	info, err := d.cli.ContainerInspect(ctx, d.mgr.ContainerName(id))
	if err != nil {
		return 0, false
	}
	return cgroupWorkingSetMB(info.ID)
}

// settledMemoryMB samples a sandbox's working set once a second until two samples in a row agree within 5%
// (at most 30 samples), and returns the last.
func (d *densityRig) settledMemoryMB(ctx context.Context, b *testing.B, id string) float64 {
	prev, ok := d.memoryMB(ctx, id)
	if !ok {
		b.Fatalf("no memory cgroup for %s", id)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range 30 {
		<-tick.C
		cur, _ := d.memoryMB(ctx, id)
		if cur > 0 && math.Abs(cur-prev) <= 0.05*prev {
			return cur
		}
		prev = cur
	}
	return prev
}

// eventDelivery pauses and resumes one sandbox n times and returns the p50, in ms, from each event's emission to
// its arrival at a subscriber: the path of the console's live stream.
func (d *densityRig) eventDelivery(ctx context.Context, b *testing.B, id string, n int) float64 {
	events, cancel := d.mgr.Subscribe(64)
	defer cancel()
	var lat []time.Duration
	wait := func(typ string) {
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case ev := <-events:
				if ev.SandboxID == id && ev.Type == typ {
					lat = append(lat, time.Since(ev.At))
					return
				}
			case <-timeout:
				b.Fatalf("no %s event for %s", typ, id)
			}
		}
	}
	for range n {
		if _, err := d.mgr.Pause(ctx, id); err != nil {
			b.Fatalf("pausing %s: %v", id, err)
		}
		wait(sandboxes.EventPaused)
		if _, err := d.mgr.Resume(ctx, id); err != nil {
			b.Fatalf("resuming %s: %v", id, err)
		}
		wait(sandboxes.EventResumed)
	}
	return float64(testenv.Percentile(lat, .5)) / float64(time.Millisecond)
}

// waitQuiet waits, at most five minutes, until the host's CPUs were at least 80% idle over a second, and returns
// the idle share of the last second and the one-minute load average then.
func waitQuiet(b *testing.B) (idle, load float64) {
	deadline := time.Now().Add(5 * time.Minute)
	prevIdle, prevTotal, err := cpuTimes()
	for err == nil {
		time.Sleep(time.Second) // a sampling window, not a wait for a state: the state is read from /proc/stat
		curIdle, curTotal, e := cpuTimes()
		if err = e; err != nil || curTotal == prevTotal {
			break
		}
		idle = float64(curIdle-prevIdle) / float64(curTotal-prevTotal)
		prevIdle, prevTotal = curIdle, curTotal
		if idle >= 0.8 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		b.Logf("host idle share unknown: %v", err)
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		load, _ = strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	}
	return idle, load
}

// cpuTimes is the host's idle (idle and iowait) and total CPU time, in clock ticks, from /proc/stat.
func cpuTimes() (idle, total uint64, err error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat field %q: %w", f, err)
		}
		if i < 8 { // user nice system idle iowait irq softirq steal; guest time is counted in user already
			total += v
		}
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total, nil
}

// sayf logs a result as it is measured, on stderr too: a long run cut short still leaves what it measured.
func sayf(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, "density: "+format+"\n", args...)
}

func envInts(b *testing.B, name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s: %q is not a list of positive numbers", name, s)
		}
		out = append(out, n)
	}
	return out
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

// deleteSandboxes deletes ids through mgr, parallel at a time, logging what fails: a benchmark's cleanup of the
// sandboxes it made, also after a failure.
func deleteSandboxes(ctx context.Context, b *testing.B, mgr *sandboxes.Manager, ids []string, parallel int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := mgr.Delete(ctx, id); err != nil {
				b.Logf("deleting %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
}
