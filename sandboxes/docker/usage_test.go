package docker_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// TestUsageStatsFromTheEngine reads a running sandbox's usage through the Manager from the real engine: memory at
// once and within the profile's limit, CPU once two samples exist; a stopped sandbox and a removed one report none.
func TestUsageStatsFromTheEngine(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}})
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
