package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandgate/sandgate/sandboxes"
)

// Resource use for the console. One-shot stats answer at once (a streaming stats call waits a second for its
// second sample), so the CPU figure is computed between two Usage calls for the same container, i.e. between two
// refreshes of whoever asks; the driver keeps the previous sample until the container is removed.

// cpuSample is a container's cumulative CPU time (ns) and, from the engine, the host's (system); or, read from the
// container's cgroup (usage_cgroup.go), the time of the reading (at). A sample of one kind is never compared with
// one of the other.
type cpuSample struct {
	total, system uint64
	at            time.Time
	percent       *float64 // cgroup samples: the figure computed when this sample was taken
}

// Usage samples a container's memory and CPU from its cgroups (usage_cgroup.go), or through the engine's one-shot
// stats where the gateway cannot read those.
func (d *Driver) Usage(ctx context.Context, containerID string) (sandboxes.Usage, error) {
	if u, ok := d.cgroupUsage(ctx, containerID); ok {
		return u, nil
	}
	r, err := d.cli.ContainerStatsOneShot(ctx, containerID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			d.cpu.forget(containerID)
			return sandboxes.Usage{}, fmt.Errorf("%w: %s", sandboxes.ErrContainerNotFound, containerID)
		}
		return sandboxes.Usage{}, fmt.Errorf("stats of %s: %w", containerID, err)
	}
	defer r.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return sandboxes.Usage{}, fmt.Errorf("decoding stats of %s: %w", containerID, err)
	}
	return d.usageOf(containerID, st), nil
}

// usageOf computes memory as `docker stats` does (page cache excluded) and CPU against the previous sample, as a
// percentage of one core.
func (d *Driver) usageOf(containerID string, st container.StatsResponse) sandboxes.Usage {
	u := sandboxes.Usage{MemoryBytes: st.MemoryStats.Usage, MemoryLimit: st.MemoryStats.Limit}
	for _, k := range []string{"total_inactive_file", "inactive_file"} { // cgroup v1, v2
		if v, ok := st.MemoryStats.Stats[k]; ok && v < u.MemoryBytes {
			u.MemoryBytes -= v
			break
		}
	}
	now := cpuSample{total: st.CPUStats.CPUUsage.TotalUsage, system: st.CPUStats.SystemUsage}
	prev, ok := d.cpu.swap(containerID, now)
	cpus := float64(st.CPUStats.OnlineCPUs)
	if cpus == 0 {
		cpus = float64(len(st.CPUStats.CPUUsage.PercpuUsage))
	}
	if ok && prev.at.IsZero() && now.system > prev.system && now.total >= prev.total && cpus > 0 {
		pct := float64(now.total-prev.total) / float64(now.system-prev.system) * cpus * 100
		u.CPUPercent = &pct
	}
	return u
}

var _ sandboxes.UsageDriver = (*Driver)(nil)
