package docker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Usage read from the container's cgroups, as the freezer is driven (freezer.go). Docker 20.10 answers a one-shot
// stats call at its collector's next tick, about a second, so a console listing many sandboxes waited that long
// however the calls were spread; the kernel's counters answer in microseconds. The figures are the ones the engine
// reports from the same files: memory in use less inactive page cache (what `docker stats` shows), the memory
// cap, and cumulative CPU time. Where the gateway cannot read them (not on the engine host as root), Usage asks the
// engine.

// unlimitedMemory is where cgroup v1 puts "no limit" (the page counter's maximum in bytes, rounded to a page).
const unlimitedMemory = 1 << 62

// cgroupStats locates one container's memory and CPU accounting: v1's memory and cpuacct hierarchies, or the
// unified one (v2 true) for each.
type cgroupStats struct {
	memDir, cpuDir string
	memV2, cpuV2   bool
}

// statsPaths finds a container's accounting cgroups under root from its init process's cgroups.
func statsPaths(root string, cgroups []procCgroup, containerID string) (cgroupStats, error) {
	mm, mrel, err := containerCgroup(cgroups, containerID, "memory")
	if err != nil {
		return cgroupStats{}, err
	}
	cm, crel, err := containerCgroup(cgroups, containerID, "cpuacct")
	if err != nil {
		return cgroupStats{}, err
	}
	return cgroupStats{memDir: filepath.Join(root, mm, mrel), cpuDir: filepath.Join(root, cm, crel), memV2: mm == "", cpuV2: cm == ""}, nil
}

// cgroupSample is one reading of a container's counters.
type cgroupSample struct {
	memory, limit uint64 // limit 0: none
	cpu           time.Duration
}

func (c cgroupStats) read() (cgroupSample, error) {
	var s cgroupSample
	usageFile, limitFile, inactiveKey := "memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file"
	if c.memV2 {
		usageFile, limitFile, inactiveKey = "memory.current", "memory.max", "inactive_file"
	}
	usage, err := readUint(filepath.Join(c.memDir, usageFile))
	if err != nil {
		return s, err
	}
	if raw, err := os.ReadFile(filepath.Join(c.memDir, limitFile)); err != nil {
		return s, err
	} else if v := strings.TrimSpace(string(raw)); v != "max" {
		if s.limit, err = strconv.ParseUint(v, 10, 64); err != nil {
			return s, fmt.Errorf("%s: %w", limitFile, err)
		}
		if s.limit >= unlimitedMemory {
			s.limit = 0
		}
	}
	inactive, err := readStat(filepath.Join(c.memDir, "memory.stat"), inactiveKey)
	if err != nil {
		return s, err
	}
	s.memory = usage
	if inactive < usage {
		s.memory = usage - inactive
	}
	if c.cpuV2 {
		usec, err := readStat(filepath.Join(c.cpuDir, "cpu.stat"), "usage_usec")
		if err != nil {
			return s, err
		}
		s.cpu = time.Duration(usec) * time.Microsecond
	} else {
		ns, err := readUint(filepath.Join(c.cpuDir, "cpuacct.usage"))
		if err != nil {
			return s, err
		}
		s.cpu = time.Duration(ns)
	}
	return s, nil
}

func readUint(path string) (uint64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return v, nil
}

// readStat reads one key of a flat keyed file ("key value" lines: memory.stat, cpu.stat).
func readStat(path, key string) (uint64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %s: %w", filepath.Base(path), key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s has no %s", filepath.Base(path), key)
}

// cgroupUsage samples a running container's usage from its cgroups; ok is false when they cannot be read here (the
// caller then asks the engine). Where they are comes from the inspect that finds the freezer (pause.go), made here
// for a container neither has looked at yet.
func (d *Driver) cgroupUsage(ctx context.Context, containerID string) (u sandboxes.Usage, ok bool) {
	cs, known := d.stats.get(containerID)
	if !known {
		if _, err := d.look(ctx, containerID); err != nil {
			return u, false
		}
		if cs, known = d.stats.get(containerID); !known {
			return u, false
		}
	}
	now := time.Now()
	s, err := cs.read()
	if err != nil {
		// Gone with a stop or a remove, or never readable here: the engine knows which.
		d.stats.forget(containerID)
		d.cpu.forget(containerID)
		return u, false
	}
	u = sandboxes.Usage{MemoryBytes: s.memory, MemoryLimit: s.limit}
	u.CPUPercent = d.cgroupCPUPercent(containerID, s.cpu, now)
	return u, true
}

// minCPUWindow is the least time between the two samples of a CPU figure. The kernel charges a running task's time
// at its scheduler ticks, so over a few milliseconds a busy container can show none; a sample taken sooner after
// the last one repeats that one's figure.
const minCPUWindow = 200 * time.Millisecond

// cgroupCPUPercent is the container's CPU use, as a percentage of one core, since the previous sample at least
// minCPUWindow old; nil until there is one.
func (d *Driver) cgroupCPUPercent(containerID string, cpu time.Duration, now time.Time) *float64 {
	prev, had := d.cpu.get(containerID)
	if !had || prev.at.IsZero() || uint64(cpu) < prev.total {
		d.cpu.swap(containerID, cpuSample{total: uint64(cpu), at: now})
		return nil
	}
	wall := now.Sub(prev.at)
	if wall < minCPUWindow {
		if prev.percent == nil {
			return nil
		}
		pct := *prev.percent
		return &pct
	}
	pct := float64(uint64(cpu)-prev.total) / float64(wall) * 100
	d.cpu.swap(containerID, cpuSample{total: uint64(cpu), at: now, percent: &pct})
	return &pct
}
