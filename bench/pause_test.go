package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// BenchmarkLifecyclePause: pause p50, and resume-to-first-exec p50 against the cold start and the warm claim of
// the same profile (each to its first exec), against the same exec on the running sandbox (what a resume adds),
// and against the engine's own `docker unpause` followed by that exec, all in one run.
//
//	go test -run x -bench LifecyclePause -benchtime 1x ./bench
func BenchmarkLifecyclePause(b *testing.B) {
	p := benchProfile("pz")
	p.WarmPoolSize = 2
	lb := newLifecycleBench(b, p, 4)
	ctx := context.Background()
	const samples = 20
	sb, err := lb.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "pz"})
	if err != nil {
		b.Fatal(err)
	}
	lb.agentExec(lb.ready(sb.ID))
	// Sandgate's pause and resume-to-first-exec, interleaved with the engine's own pause, and its unpause followed
	// by the same first exec, on the same container (straight through the Engine API, bypassing the Manager).
	var pause, resume, thaw, execAlone, enginePause, engineUnpause, engineResume []time.Duration
	for range samples {
		// Baseline: the same first exec on the running sandbox.
		start := time.Now()
		lb.agentExec(lb.ready(sb.ID))
		execAlone = append(execAlone, time.Since(start))

		start = time.Now()
		if _, err := lb.mgr.Pause(ctx, sb.ID); err != nil {
			b.Fatal(err)
		}
		pause = append(pause, time.Since(start))
		start = time.Now()
		t, err := lb.mgr.EnsureRunning(ctx, sb.ID) // what every request does to a paused sandbox
		if err != nil {
			b.Fatal(err)
		}
		thaw = append(thaw, time.Since(start))
		lb.agentExec(t)
		resume = append(resume, time.Since(start))

		// Docker's paused flag can lag right after an unpause (sandboxes/docker/pause.go): wait for it first.
		name := lb.mgr.ContainerName(sb.ID)
		for info, err := lb.cli.ContainerInspect(ctx, name); err != nil || info.State.Paused; info, err = lb.cli.ContainerInspect(ctx, name) {
			if err != nil {
				b.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		start = time.Now()
		if err := lb.cli.ContainerPause(ctx, name); err != nil {
			b.Fatal(err)
		}
		enginePause = append(enginePause, time.Since(start))
		start = time.Now()
		if err := lb.cli.ContainerUnpause(ctx, name); err != nil {
			b.Fatal(err)
		}
		engineUnpause = append(engineUnpause, time.Since(start))
		lb.agentExec(t)
		engineResume = append(engineResume, time.Since(start))
	}
	var cold, warm []time.Duration
	for range 5 {
		for deadline := time.Now().Add(2 * time.Minute); lb.mgr.WarmReady() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("warm pool never refilled")
			}
		}
		start := time.Now()
		w, err := lb.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "pz"})
		if err != nil || w.LaunchType != sandboxes.LaunchWarm {
			b.Fatalf("warm claim: %+v %v", w, err)
		}
		lb.agentExec(lb.ready(w.ID))
		warm = append(warm, time.Since(start))
		_ = lb.mgr.Delete(ctx, w.ID)

		start = time.Now()
		c, err := lb.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "pz", Env: map[string]string{"COLD": "1"}}) // env skips the pool
		if err != nil || c.LaunchType != sandboxes.LaunchCold {
			b.Fatalf("cold create: %+v %v", c, err)
		}
		lb.agentExec(lb.ready(c.ID))
		cold = append(cold, time.Since(start))
		_ = lb.mgr.Delete(ctx, c.ID)
	}
	p50 := func(d []time.Duration) float64 { return ms(testenv.Percentile(d, .5)) }
	b.ReportMetric(p50(pause), "pause-p50-ms")
	b.ReportMetric(p50(enginePause), "docker-pause-p50-ms")
	b.ReportMetric(p50(engineUnpause), "docker-unpause-p50-ms")
	b.ReportMetric(p50(engineResume), "docker-unpause-exec-p50-ms")
	b.ReportMetric(p50(resume), "resume-exec-p50-ms")
	b.ReportMetric(p50(thaw), "resume-alone-p50-ms")
	b.ReportMetric(p50(execAlone), "running-exec-p50-ms")
	b.ReportMetric(p50(cold), "cold-exec-p50-ms")
	b.ReportMetric(p50(warm), "warm-exec-p50-ms")
	b.Logf("pause: p50 %.1f ms, p95 %.1f ms; resume to first exec: p50 %.1f ms, p95 %.1f ms (target p50 < 50 ms); "+
		"cold create to first exec: p50 %.0f ms (resume is %.1fx faster); warm claim to first exec: p50 %.1f ms (resume/warm %.2fx)",
		p50(pause), ms(testenv.Percentile(pause, .95)), p50(resume), ms(testenv.Percentile(resume, .95)),
		p50(cold), p50(cold)/p50(resume), p50(warm), p50(resume)/p50(warm))
	b.Logf("where a resume's time goes: the resume itself (EnsureRunning on the paused sandbox) p50 %.2f ms; the same first exec on the running sandbox p50 %.1f ms (resume to first exec is %.2fx it)",
		p50(thaw), p50(execAlone), p50(resume)/p50(execAlone))
	b.Logf("engine baseline on the same container: docker pause p50 %.1f ms (sandgate's pause %.2fx); docker unpause alone p50 %.1f ms; docker unpause + first exec p50 %.1f ms (sandgate's resume %.2fx)",
		p50(enginePause), p50(pause)/p50(enginePause), p50(engineUnpause), p50(engineResume), p50(resume)/p50(engineResume))
}

// BenchmarkSnapshotFork: snapshot and fork time and MB/s for 10 MB, 100 MB and 1 GB workspaces (1 MiB files),
// against `cp -a` of the same data into a volume on the same disk, in the same run. Each small size is measured
// several times, interleaved with its cp -a, and compared by medians: on a shared virtual disk one copy of 10 MB
// varies by 5x from one second to the next (10 MB gets the most samples: its copies are the shortest, so a
// scheduling delay moves its ratio most).
//
//	go test -run x -bench SnapshotFork -benchtime 1x -timeout 30m ./bench
func BenchmarkSnapshotFork(b *testing.B) {
	lb := newLifecycleBench(b, benchProfile("snap"), 4)
	ctx := context.Background()
	for _, size := range []struct{ mb, samples int }{{10, 15}, {100, 5}, {1024, 1}} {
		mb := size.mb
		sb, err := lb.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "snap"})
		if err != nil {
			b.Fatal(err)
		}
		lb.ready(sb.ID)
		fill := fmt.Sprintf("import os\nfor i in range(%d):\n    open('/workspace/f%%04d' %% i, 'wb').write(os.urandom(1 << 20))", mb)
		if out, err := exec.Command("docker", "exec", lb.mgr.ContainerName(sb.ID), "python3", "-c", fill).CombinedOutput(); err != nil {
			b.Fatalf("filling %d MB: %v %s", mb, err, out)
		}
		got, _ := lb.mgr.Get(ctx, sb.ID)
		src, err := lb.cli.VolumeInspect(ctx, lb.mgr.VolumeName(got.WorkspaceID))
		if err != nil {
			b.Fatal(err)
		}

		// Baseline: cp -a of the same files into a fresh volume on the same disk, right before each snapshot and
		// right after each fork (the disk's state drifts over a run).
		cpA := func() time.Duration {
			base := testenv.Unique("sgb-cp")
			dst, err := lb.cli.VolumeCreate(ctx, volume.CreateOptions{Name: base, Labels: map[string]string{lb.ns + ".managed": "true"}})
			if err != nil {
				b.Fatal(err)
			}
			defer lb.cli.VolumeRemove(ctx, base, true)
			settle(b)
			start := time.Now()
			if out, err := exec.Command("cp", "-a", src.Mountpoint+"/.", dst.Mountpoint+"/").CombinedOutput(); err != nil {
				b.Fatalf("cp -a: %v %s", err, out)
			}
			return time.Since(start)
		}
		var cps, snaps, forks, copies []time.Duration
		var bytes int64
		method := ""
		for range size.samples {
			cps = append(cps, cpA())
			settle(b)
			start := time.Now()
			snap, err := lb.mgr.CreateSnapshot(ctx, sb.ID, sandboxes.SnapshotRequest{})
			if err != nil {
				b.Fatal(err)
			}
			snaps = append(snaps, time.Since(start))
			bytes = snap.SizeBytes
			_ = lb.mgr.DeleteSnapshot(ctx, snap.ID)

			settle(b)
			start = time.Now()
			fork, err := lb.mgr.Fork(ctx, sb.ID, sandboxes.ForkRequest{})
			if err != nil {
				b.Fatal(err)
			}
			forks = append(forks, time.Since(start))
			copies = append(copies, fork.Copy.Duration)
			method = fork.Copy.Method
			// The fork's own start (untimed) is over before the next copy, so no copy shares the machine with it.
			lb.ready(fork.Sandbox.ID)
			_ = lb.mgr.Delete(ctx, fork.Sandbox.ID)
			cps = append(cps, cpA())
		}
		p50 := func(d []time.Duration) time.Duration { return testenv.Percentile(d, .5) }
		mbps := func(d time.Duration) float64 { return float64(bytes) / (1 << 20) / d.Seconds() }
		cp, snapT, forkT := p50(cps), p50(snaps), p50(forks)
		label := fmt.Sprintf("%dMB", mb)
		b.ReportMetric(ms(snapT), label+"-snapshot-ms")
		b.ReportMetric(ms(forkT), label+"-fork-ms")
		b.ReportMetric(ms(cp), label+"-cp-a-ms")
		b.ReportMetric(float64(snapT)/float64(cp), label+"-snapshot/cp")
		b.ReportMetric(float64(forkT)/float64(cp), label+"-fork/cp")
		b.Logf("%5d MB (running source, p50 of %d, cp -a %d): cp -a %.0f ms (%.0f MB/s; range %.0f-%.0f ms); snapshot %.0f ms (%.0f MB/s, %.2fx cp -a); "+
			"fork %.0f ms (%.0f MB/s; the copy alone %.0f ms, method %s): fork %.2fx cp -a (target <= 1.5x)",
			mb, size.samples, len(cps), ms(cp), mbps(cp), ms(slices.Min(cps)), ms(slices.Max(cps)), ms(snapT), mbps(snapT), float64(snapT)/float64(cp),
			ms(forkT), mbps(forkT), ms(p50(copies)), method, float64(forkT)/float64(cp))
		_ = lb.mgr.Delete(ctx, sb.ID)
	}
}

// settle writes back the dirty pages the previous step left (untimed), so every copy starts from the same disk
// state instead of paying for its predecessor's writeback. No copy here fsyncs its own data, cp -a included.
func settle(b *testing.B) {
	if out, err := exec.Command("sync").CombinedOutput(); err != nil {
		b.Fatalf("sync: %v %s", err, out)
	}
}
