package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// BenchmarkWorkspaceCap: what a workspace size limit (a loop-backed ext4 image per volume, sandboxes/docker
// workspace_cap.go) costs against an unlimited local volume, in the same run: the driver's volume create and
// remove, a cold create to the first exec, and a 100 MB write (dd with fsync) in the sandbox. Samples of the two
// kinds are interleaved, so a busy moment of the shared disk hits both.
//
//	go test -run x -bench WorkspaceCap -benchtime 1x ./bench
func BenchmarkWorkspaceCap(b *testing.B) {
	image := testenv.Image(b, "base")
	ns := testenv.Unique("sgw")
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
	capped, open := benchProfile("capped"), benchProfile("open")
	capped.Resources.WorkspaceSize = "1g"
	capped.Image, open.Image = image, image
	ctx := context.Background()
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{capped, open}, GCInterval: time.Hour}); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mgr.Close() })

	const samples = 10
	labels := func(size int64) map[string]string {
		l := map[string]string{ns + ".managed": "true"}
		if size > 0 {
			l[ns+"."+sandboxes.LabelWorkspaceSize] = strconv.FormatInt(size, 10)
		}
		return l
	}
	var createCapped, createOpen, removeCapped, removeOpen []time.Duration
	for i := range samples {
		for _, kind := range []struct {
			size           int64
			create, remove *[]time.Duration
		}{{1 << 30, &createCapped, &removeCapped}, {0, &createOpen, &removeOpen}} {
			name := fmt.Sprintf("%s-bench-%d-%d", ns, kind.size, i)
			start := time.Now()
			if err := drv.CreateVolume(ctx, name, labels(kind.size)); err != nil {
				b.Fatal(err)
			}
			*kind.create = append(*kind.create, time.Since(start))
			start = time.Now()
			if err := drv.RemoveVolume(ctx, name); err != nil {
				b.Fatal(err)
			}
			*kind.remove = append(*kind.remove, time.Since(start))
		}
	}

	// Cold create to first exec, then 100 MB written with fsync, in one sandbox of each kind per round.
	var coldCapped, coldOpen, ddCapped, ddOpen []time.Duration
	for range 5 {
		for _, kind := range []struct {
			profile  string
			cold, dd *[]time.Duration
		}{{"capped", &coldCapped, &ddCapped}, {"open", &coldOpen, &ddOpen}} {
			start := time.Now()
			sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: kind.profile})
			if err != nil {
				b.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			_, err = mgr.EnsureRunning(rctx, sb.ID)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			name := mgr.ContainerName(sb.ID)
			if out, err := exec.Command("docker", "exec", name, "true").CombinedOutput(); err != nil {
				b.Fatalf("first exec: %s %v", out, err)
			}
			*kind.cold = append(*kind.cold, time.Since(start))
			start = time.Now()
			if out, err := exec.Command("docker", "exec", name, "dd", "if=/dev/zero", "of=/workspace/f", "bs=1M", "count=100", "conv=fsync").CombinedOutput(); err != nil {
				b.Fatalf("dd: %s %v", out, err)
			}
			*kind.dd = append(*kind.dd, time.Since(start))
			if err := mgr.Delete(ctx, sb.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	p50 := func(d []time.Duration) float64 { return ms(testenv.Percentile(d, .5)) }
	mbps := func(d []time.Duration) float64 { return 100 / testenv.Percentile(d, .5).Seconds() }
	b.ReportMetric(p50(createCapped), "capped-volume-create-p50-ms")
	b.ReportMetric(p50(createOpen), "volume-create-p50-ms")
	b.ReportMetric(p50(coldCapped), "capped-cold-exec-p50-ms")
	b.ReportMetric(p50(coldOpen), "cold-exec-p50-ms")
	b.ReportMetric(mbps(ddCapped), "capped-write-MB/s")
	b.ReportMetric(mbps(ddOpen), "write-MB/s")
	b.Logf("volume create p50: capped (1 GiB image, mkfs, losetup, mount) %.1f ms, unlimited %.1f ms (%.1fx); remove p50: capped %.1f ms, unlimited %.1f ms (%.1fx)",
		p50(createCapped), p50(createOpen), p50(createCapped)/p50(createOpen), p50(removeCapped), p50(removeOpen), p50(removeCapped)/p50(removeOpen))
	b.Logf("cold create to first exec p50: capped %.0f ms, unlimited %.0f ms (%.2fx)", p50(coldCapped), p50(coldOpen), p50(coldCapped)/p50(coldOpen))
	b.Logf("100 MB dd with fsync p50 (docker exec included): capped %.0f MB/s, unlimited %.0f MB/s (%.2fx)", mbps(ddCapped), mbps(ddOpen), mbps(ddCapped)/mbps(ddOpen))
}
