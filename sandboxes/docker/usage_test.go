package docker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// TestUsageStatsFromTheEngine reads a running sandbox's usage through the Manager on the real engine: from the
// container's cgroups (the gateway runs on the engine host as root), memory at once, within the profile's limit and
// within a few MiB of the engine's own figure, CPU once two samples exist; a stopped sandbox and a removed one report
// none. Under runc and under gVisor (the console's CPU and memory columns for an isolated profile): gVisor's kernel
// and its tasks are charged to the container's cgroup like runc's processes.
func TestUsageStatsFromTheEngine(t *testing.T) {
	eachRuntime(t, usageStatsFromTheEngine)
}

func usageStatsFromTheEngine(t *testing.T, runtime string) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{runtimeProfile("small", runtime)}})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	sb := h.create("small")
	h.ready(sb.ID)
	// A busy process, so the CPU figure has something to measure; it ends with the container.
	if out, err := h.exec(sb.ID, "sh", "-c", "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &"); err != nil {
		t.Fatalf("starting a busy loop: %v %s", err, out)
	}

	first := h.mgr.Usage(ctx, []string{sb.ID})[sb.ID]
	if first.MemoryBytes == 0 || first.MemoryLimit != 256<<20 || first.MemoryBytes > first.MemoryLimit {
		t.Fatalf("first sample: %+v (want memory in use under the 256m limit)", first)
	}
	containerID := h.inspect(sb.ID).ID
	if !docker.UsageFromCgroups(ctx, h.drv, containerID) {
		t.Fatal("usage was not read from the container's cgroups")
	}
	// The engine's figure from the same counters, read between two of ours: it lies within their range, give or
	// take what the idle container's memory moves by in the engine's own sampling time.
	engineMemory := func() uint64 {
		r, err := h.cli.ContainerStatsOneShot(ctx, containerID)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var st container.StatsResponse
		if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.MemoryStats.Usage - min(st.MemoryStats.Stats["total_inactive_file"]+st.MemoryStats.Stats["inactive_file"], st.MemoryStats.Usage)
	}
	before := h.mgr.Usage(ctx, []string{sb.ID})[sb.ID].MemoryBytes
	engine := engineMemory()
	after := h.mgr.Usage(ctx, []string{sb.ID})[sb.ID].MemoryBytes
	const slack = 4 << 20
	if engine+slack < min(before, after) || engine > max(before, after)+slack {
		t.Fatalf("memory: the engine says %d bytes, the cgroup read %d and %d around it", engine, before, after)
	}
	// CPU is measured between two samples; the host's CPU clock must have moved between them, so poll.
	var cpu *float64
	for cpu == nil {
		if ctx.Err() != nil {
			t.Fatal("no CPU figure after repeated samples")
		}
		u, ok := h.mgr.Usage(ctx, []string{sb.ID})[sb.ID]
		if !ok {
			t.Fatal("a running sandbox's usage went missing")
		}
		cpu = u.CPUPercent
		if cpu == nil {
			time.Sleep(50 * time.Millisecond) // polling for the next sample, not a guess at a duration
		}
	}
	if *cpu <= 0 {
		t.Fatalf("CPU of a sandbox running a busy loop: %.2f%%", *cpu)
	}
	t.Logf("usage: %.1f%% CPU, %d of %d bytes", *cpu, first.MemoryBytes, first.MemoryLimit)

	if err := h.mgr.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got := h.mgr.Usage(ctx, []string{sb.ID}); len(got) != 0 {
		t.Fatalf("usage of a stopped sandbox: %+v", got)
	}
	if err := h.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got := h.mgr.Usage(ctx, []string{sb.ID}); len(got) != 0 {
		t.Fatalf("usage of a deleted sandbox: %+v", got)
	}
}
