package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// runtimeFigures are one runtime's medians.
type runtimeFigures struct {
	cold, warm, execTrue, pyCell, write100, read100, pip, chromium, chromiumAfterReady time.Duration
	idle                                                                               idleMemory
}

// BenchmarkRuntimes: runc against gVisor (runsc) in the same run, on the same Manager, image and profile but for
// the runtime: cold create to ready, warm claim to first exec (a Manager per runtime), an exec of `true` through the
// agent, a Python cell, writing and reading 100 MB in the workspace, `pip install` of a wheel from a local index (a
// --find-links directory in the workspace, no network), Chromium's cold start in the browser image to its first CDP
// answer, and the memory an idle sandbox holds, as its cgroup's working set and as the PSS of its host processes
// (idleMemory says why both), and the CPU it uses while idle. Agent calls go through the Manager's agent connection pool, as the gateway's do. It
// skips where runsc cannot be registered.
func BenchmarkRuntimes(b *testing.B) {
	testenv.Runsc(b)
	image := testenv.Image(b, "base")
	ns := testenv.Unique("sgbr")
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
	profile := func(id, runtime string) sandboxes.Profile {
		p := benchProfile(id)
		p.Image, p.Runtime, p.Resources.Memory = image, runtime, "1g"
		return p
	}
	ctx := context.Background()
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{profile("runc", ""), profile("runsc", sandboxes.RuntimeGVisor)},
		GCInterval: time.Hour}); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mgr.Close() })
	usage, err := docker.New("")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { usage.Close() })
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	wheel, wheelData := tinyWheel(b)
	lb := &lifecycleBench{b: b, ns: ns, image: image, mgr: mgr}

	measure := func(runtime string) runtimeFigures {
		var f runtimeFigures
		const samples = 5
		var cold, execs, cells, writes, reads, pips []time.Duration
		var idle []idleMemory
		for range samples {
			start := time.Now()
			sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: runtime})
			if err != nil {
				b.Fatal(err)
			}
			tg := lb.ready(sb.ID)
			cold = append(cold, time.Since(start))
			ag := agentapi.NewClientFor(tg.Addr, tg.Token, mgr.AgentHTTPClient())
			// Idle: ready, nothing run yet but the agent (and what the image starts with it).
			idle = append(idle, settledIdle(ctx, b, cli, usage, mgr.ContainerName(sb.ID)))
			for range 4 {
				t0 := time.Now()
				lb.agentExec(tg)
				execs = append(execs, time.Since(t0))
			}
			if _, err := ag.PythonExec(ctx, agentapi.KernelExecRequest{Code: "import math"}); err != nil { // the kernel's start
				b.Fatal(err)
			}
			for range 4 {
				t0 := time.Now()
				res, err := ag.PythonExec(ctx, agentapi.KernelExecRequest{Code: "sum(i * i for i in range(100000))"})
				if err != nil || !res.Success {
					b.Fatalf("python cell: %+v %v", res, err)
				}
				cells = append(cells, time.Since(t0))
			}
			shell := func(cmd string) time.Duration {
				t0 := time.Now()
				res, err := ag.Exec(ctx, agentapi.ExecRequest{Cmd: cmd, TimeoutMS: 120_000})
				if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
					b.Fatalf("%s: %+v %v", cmd, res, err)
				}
				return time.Since(t0)
			}
			writes = append(writes, shell("dd if=/dev/zero of=/workspace/100m bs=1M count=100 conv=fsync status=none"))
			reads = append(reads, shell("dd if=/workspace/100m of=/dev/null bs=1M status=none"))
			pips = append(pips, pipInstall(ctx, b, ag, wheel, wheelData))
			_ = mgr.Delete(ctx, sb.ID)
		}
		f.cold, f.execTrue, f.pyCell = testenv.Percentile(cold, .5), testenv.Percentile(execs, .5), testenv.Percentile(cells, .5)
		f.write100, f.read100, f.pip = testenv.Percentile(writes, .5), testenv.Percentile(reads, .5), testenv.Percentile(pips, .5)
		for _, m := range idle {
			f.idle.cgroupMiB += m.cgroupMiB / float64(len(idle))
			f.idle.pssMiB += m.pssMiB / float64(len(idle))
			f.idle.cpuPct += m.cpuPct / float64(len(idle))
		}
		return f
	}
	runc, runsc := measure("runc"), measure("runsc")
	runc.warm, runsc.warm = warmClaimToExec(b, ""), warmClaimToExec(b, sandboxes.RuntimeGVisor)
	runc.chromium, runc.chromiumAfterReady = chromiumColdStart(b, "")
	runsc.chromium, runsc.chromiumAfterReady = chromiumColdStart(b, sandboxes.RuntimeGVisor)
	var t strings.Builder
	t.WriteString("\n| median of 5 sandboxes | runc | runsc | runsc/runc |\n|---|---|---|---|\n")
	row := func(name string, a, b time.Duration) {
		fmt.Fprintf(&t, "| %s | %.1f ms | %.1f ms | %.2fx |\n", name, ms(a), ms(b), float64(b)/float64(a))
	}
	row("cold create to ready", runc.cold, runsc.cold)
	row("warm claim to first exec", runc.warm, runsc.warm)
	row("exec `true` (agent)", runc.execTrue, runsc.execTrue)
	row("Python cell", runc.pyCell, runsc.pyCell)
	row("write 100 MB (fsync)", runc.write100, runsc.write100)
	row("read 100 MB", runc.read100, runsc.read100)
	row("pip install, local wheel", runc.pip, runsc.pip)
	row("Chromium cold: create to CDP answer (median of 3)", runc.chromium, runsc.chromium)
	row("Chromium cold: ready to CDP answer (median of 3)", runc.chromiumAfterReady, runsc.chromiumAfterReady)
	mem := func(name string, a, b float64) {
		fmt.Fprintf(&t, "| %s | %.1f MiB | %.1f MiB | %.2fx |\n", name, a, b, b/a)
	}
	mem("idle memory, cgroup working set (mean)", runc.idle.cgroupMiB, runsc.idle.cgroupMiB)
	mem("idle memory, PSS of host processes (mean)", runc.idle.pssMiB, runsc.idle.pssMiB)
	fmt.Fprintf(&t, "| idle CPU, %% of one core over %s (mean) | %.2f %% | %.2f %% | %.1fx |\n", idleCPUWindow,
		runc.idle.cpuPct, runsc.idle.cpuPct, runsc.idle.cpuPct/runc.idle.cpuPct)
	b.Log(t.String())
	b.ReportMetric(ms(runsc.cold), "runsc-cold-p50-ms")
	b.ReportMetric(float64(runsc.cold)/float64(runc.cold), "runsc/runc-cold")
	b.ReportMetric(float64(runsc.execTrue)/float64(runc.execTrue), "runsc/runc-exec")
	b.ReportMetric(runsc.idle.cgroupMiB, "runsc-idle-MiB")
	b.ReportMetric(runsc.idle.pssMiB, "runsc-idle-pss-MiB")
	b.ReportMetric(ms(runsc.warm), "runsc-warm-exec-p50-ms")
}

// warmClaimToExec is the median time from Create, served by a warm member, to the first exec's answer, over 5
// claims, on a Manager of its own whose one profile runs under runtime.
func warmClaimToExec(b *testing.B, runtime string) time.Duration {
	p := benchProfile("warm")
	p.WarmPoolSize, p.Runtime = 1, runtime
	lb := newLifecycleBench(b, p, 2)
	var d []time.Duration
	for range 5 {
		deadline := time.Now().Add(2 * time.Minute)
		for lb.mgr.WarmReady() == 0 {
			if time.Now().After(deadline) {
				b.Fatal("warm pool never refilled")
			}
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		sb, err := lb.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "warm"})
		if err != nil {
			b.Fatal(err)
		}
		if sb.LaunchType != sandboxes.LaunchWarm {
			b.Fatalf("not a warm claim: %+v", sb)
		}
		lb.agentExec(lb.ready(sb.ID))
		d = append(d, time.Since(start))
		_ = lb.mgr.Delete(context.Background(), sb.ID)
	}
	return testenv.Percentile(d, .5)
}
