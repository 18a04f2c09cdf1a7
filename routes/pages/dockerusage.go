package pages

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// DockerUsage reads sandboxes' CPU and memory from the engine's container stats, finding containers by the
// Manager's id label. The Manager's driver has no stats call, and the console only needs a glance, so this asks
// the engine directly with one-shot stats (no 1 s wait per container): CPU is computed between two of the
// console's refreshes.
type DockerUsage struct {
	cli     *client.Client
	idLabel string

	mu   sync.Mutex
	prev map[string]cpuSample // container id -> last sample
}

type cpuSample struct{ total, system uint64 }

// MaxUsageQueries bounds the containers one Usage call asks the engine about.
const MaxUsageQueries = 64

// NewDockerUsage talks to host (empty: DOCKER_HOST or the default socket) about the containers labelled
// "<namespace>.id". It does no I/O.
func NewDockerUsage(host, namespace string) (*DockerUsage, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for usage: %w", err)
	}
	return &DockerUsage{cli: cli, idLabel: namespace + ".id", prev: map[string]cpuSample{}}, nil
}

// Close releases the engine client.
func (d *DockerUsage) Close() error { return d.cli.Close() }

// Usage returns what the engine reports for the running containers of ids. Engine errors leave ids out: the
// console shows a dash rather than failing the list.
func (d *DockerUsage) Usage(ctx context.Context, ids []string) map[string]Usage {
	out := map[string]Usage{}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	list, err := d.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", d.idLabel))})
	if err != nil {
		return out
	}
	seen := map[string]bool{}
	for _, c := range list {
		id := c.Labels[d.idLabel]
		if !want[id] || len(seen) >= MaxUsageQueries {
			continue
		}
		seen[c.ID] = true
		st, err := d.stats(ctx, c.ID)
		if err != nil {
			continue
		}
		out[id] = d.usageOf(c.ID, st)
	}
	d.mu.Lock()
	for cid := range d.prev {
		if !seen[cid] {
			delete(d.prev, cid)
		}
	}
	d.mu.Unlock()
	return out
}

func (d *DockerUsage) stats(ctx context.Context, cid string) (container.StatsResponse, error) {
	var st container.StatsResponse
	r, err := d.cli.ContainerStatsOneShot(ctx, cid)
	if err != nil {
		return st, fmt.Errorf("stats of %s: %w", cid, err)
	}
	defer r.Body.Close()
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("decoding stats of %s: %w", cid, err)
	}
	return st, nil
}

// usageOf computes memory like `docker stats` (page cache excluded) and CPU against the previous sample.
func (d *DockerUsage) usageOf(cid string, st container.StatsResponse) Usage {
	u := Usage{MemoryBytes: st.MemoryStats.Usage, MemoryLimit: st.MemoryStats.Limit}
	for _, k := range []string{"total_inactive_file", "inactive_file"} { // cgroup v1, v2
		if v, ok := st.MemoryStats.Stats[k]; ok && v < u.MemoryBytes {
			u.MemoryBytes -= v
			break
		}
	}
	now := cpuSample{total: st.CPUStats.CPUUsage.TotalUsage, system: st.CPUStats.SystemUsage}
	d.mu.Lock()
	prev, ok := d.prev[cid]
	d.prev[cid] = now
	d.mu.Unlock()
	cpus := float64(st.CPUStats.OnlineCPUs)
	if cpus == 0 {
		cpus = float64(len(st.CPUStats.CPUUsage.PercpuUsage))
	}
	if ok && now.system > prev.system && now.total >= prev.total && cpus > 0 {
		pct := float64(now.total-prev.total) / float64(now.system-prev.system) * cpus * 100
		u.CPUPercent = &pct
	}
	return u
}
