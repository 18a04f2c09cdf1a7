package bench

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// This file holds what BenchmarkRuntimes measures besides the agent's calls: pip from a local index (a wheel made
// here), the idle sandbox's proportional set size, and Chromium's cold start in the browser image.

// tinyWheel is a pure-Python wheel (PEP 427) built in memory: one module and its dist-info, so pip installs it with
// no network and no build step. Its name and the file name pip looks for in --find-links.
func tinyWheel(b *testing.B) (name string, data []byte) {
	const dist, version = "sgbench_tiny", "1.0"
	info := dist + "-" + version + ".dist-info/"
	files := []struct{ path, body string }{
		{dist + "/__init__.py", "VALUE = 42\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: sgbench-tiny\nVersion: " + version + "\nSummary: sandgate benchmark wheel\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: sandgate-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(w, f.body); err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(w, record.String()); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return dist + "-" + version + "-py3-none-any.whl", buf.Bytes()
}

// pipInstall uploads the wheel into the sandbox's workspace (the local index: a --find-links directory) and returns
// how long `pip install` of it takes there, offline (--no-index), into a target directory in the workspace.
func pipInstall(ctx context.Context, b *testing.B, ag *agentapi.Client, wheel string, data []byte) time.Duration {
	if _, err := ag.Upload(ctx, "/workspace/wheels/"+wheel, bytes.NewReader(data), agentapi.UploadOptions{Size: int64(len(data))}); err != nil {
		b.Fatalf("uploading the wheel: %v", err)
	}
	cmd := "python3 -m pip install --no-index --find-links /workspace/wheels --target /workspace/site --no-cache-dir " +
		"--disable-pip-version-check --no-warn-script-location --quiet sgbench-tiny"
	t0 := time.Now()
	res, err := ag.Exec(ctx, agentapi.ExecRequest{Cmd: cmd, TimeoutMS: 120_000})
	d := time.Since(t0)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		b.Fatalf("pip install: %+v %v", res, err)
	}
	check, err := ag.Exec(ctx, agentapi.ExecRequest{Cmd: "PYTHONPATH=/workspace/site python3 -c 'import sgbench_tiny; assert sgbench_tiny.VALUE == 42'"})
	if err != nil || check.ExitCode == nil || *check.ExitCode != 0 {
		b.Fatalf("the installed wheel does not import: %+v %v", check, err)
	}
	return d
}

// idleMemory is one idle sandbox's memory in two measures that mean the same under both runtimes:
//   - cgroup: the container's memory cgroup less inactive file pages (docker stats' figure, what the memory limit
//     sees). Under runc that is the sandbox's processes; under runsc, gVisor's Sentry, Gofer and the stub processes
//     of its systrap platform, with the sandbox's own processes and page cache inside the Sentry's memory file. A
//     runc sandbox's file pages that another container of the same image faulted in first are charged to that one.
//   - PSS: the proportional set size summed over the cgroup's host processes (smaps_rollup), each shared page divided
//     among the processes mapping it: the agent binary and libraries among all runc sandboxes, runsc's binary among
//     all gVisor sandboxes, the Sentry's memory file among the Sentry and its stubs.
//
// With it, the CPU the idle sandbox uses (its cgroup's CPU time over idleCPUWindow, in % of one core): under runsc
// that is gVisor's own upkeep, there with nothing but `sleep` running in the sandbox too.
type idleMemory struct{ cgroupMiB, pssMiB, cpuPct float64 }

// idleCPUWindow is how long the idle sandbox's CPU time is counted, once its memory has settled.
const idleCPUWindow = 3 * time.Second

// settledIdle samples a ready, idle sandbox every half second until two samples in a row agree within 5% (at most
// 20 samples), and returns the last: an agent or a Sentry still growing after readiness is counted once it settles.
func settledIdle(ctx context.Context, b *testing.B, cli *client.Client, usage *docker.Driver, container string) idleMemory {
	info, err := cli.ContainerInspect(ctx, container)
	if err != nil {
		b.Fatal(err)
	}
	sample := func() idleMemory {
		u, err := usage.Usage(ctx, container)
		if err != nil {
			b.Fatal(err)
		}
		pss, err := cgroupPSSMiB(info.ID)
		if err != nil {
			b.Fatal(err)
		}
		return idleMemory{cgroupMiB: float64(u.MemoryBytes) / (1 << 20), pssMiB: pss}
	}
	prev := sample()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for range 20 {
		<-tick.C
		cur := sample()
		settled := math.Abs(cur.cgroupMiB-prev.cgroupMiB) <= 0.05*prev.cgroupMiB && math.Abs(cur.pssMiB-prev.pssMiB) <= 0.05*prev.pssMiB
		prev = cur
		if settled {
			break
		}
	}
	before, err := cgroupCPUTime(info.ID)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	time.Sleep(idleCPUWindow) // the measuring window, not a wait for a state
	after, err := cgroupCPUTime(info.ID)
	if err != nil {
		b.Fatal(err)
	}
	prev.cpuPct = 100 * float64(after-before) / float64(time.Since(start))
	return prev
}

// cgroupCPUTime is the CPU time a container's cgroup has used (v1 cpuacct.usage; v2 cpu.stat's usage_usec).
func cgroupCPUTime(id string) (time.Duration, error) {
	if ns, err := readCgroupInt("/sys/fs/cgroup/cpuacct/docker/"+id, "cpuacct.usage"); err == nil {
		return time.Duration(ns), nil
	}
	stat, err := os.ReadFile("/sys/fs/cgroup/system.slice/docker-" + id + ".scope/cpu.stat")
	if err != nil {
		return 0, fmt.Errorf("reading container %s's CPU time: %w", id, err)
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no usage_usec in container %s's cpu.stat", id)
}

// cgroupPSSMiB sums Pss over the processes of a container's memory cgroup (v1 with the cgroupfs driver, as on our
// engines; v2 as a fallback). A process that ends between the listing and its read is left out.
func cgroupPSSMiB(id string) (float64, error) {
	var procs []byte
	var err error
	for _, dir := range []string{"/sys/fs/cgroup/memory/docker/" + id, "/sys/fs/cgroup/system.slice/docker-" + id + ".scope"} {
		if procs, err = os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("reading the processes of container %s's cgroup: %w", id, err)
	}
	var kb float64
	for _, pid := range strings.Fields(string(procs)) {
		rollup, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(rollup), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				kb += n
				break
			}
		}
	}
	return kb / 1024, nil
}

// chromiumColdStart is the median, over 3 sandboxes of the browser image under runtime, of the time from Create
// (cold) to Chromium's first CDP answer through the agent (/v1/browser/info: Chromium's /json/version and
// /json/list), and the part of it after the sandbox was ready.
func chromiumColdStart(b *testing.B, runtime string) (total, afterReady time.Duration) {
	image := testenv.Image(b, "browser")
	ns := testenv.Unique("sgbrb")
	testenv.RemoveNamespace(b, ns)
	drv, err := docker.New("")
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: ns}, drv,
		sandboxes.NewBoltStore(filepath.Join(b.TempDir(), "store.db")), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	p := benchProfile("browser")
	p.Image, p.Runtime = image, runtime
	p.Capabilities = append(p.Capabilities, sandboxes.CapBrowser)
	p.Resources.Memory, p.Resources.Pids, p.Resources.CPUs = "1g", 512, 1
	ctx := context.Background()
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour, StartTimeout: 5 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	lb := &lifecycleBench{b: b, ns: ns, image: image, mgr: mgr}
	var totals, afters []time.Duration
	for range 3 {
		start := time.Now()
		sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: "browser"})
		if err != nil {
			b.Fatal(err)
		}
		tg := lb.ready(sb.ID)
		ready := time.Now()
		ag := agentapi.NewClientFor(tg.Addr, tg.Token, mgr.AgentHTTPClient())
		deadline := ready.Add(2 * time.Minute)
		for {
			info, err := ag.BrowserInfo(ctx)
			if err == nil && len(info.Version) > 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("Chromium never answered CDP under %q: %+v %v", runtime, info, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		totals, afters = append(totals, time.Since(start)), append(afters, time.Since(ready))
		_ = mgr.Delete(ctx, sb.ID)
	}
	return testenv.Percentile(totals, .5), testenv.Percentile(afters, .5)
}
