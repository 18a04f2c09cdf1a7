package execd

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// The sandbox's metrics are its cgroup's (Docker mounts the container's own cgroup at /sys/fs/cgroup), so a
// sandbox limited to 1 CPU and 512 MiB reports those, where execd reports the host's. Without readable cgroup
// files the agent falls back to /proc (the host's view, as execd).

// cgroupRoot is where the container's cgroup files are; a variable for tests.
var cgroupRoot = "/sys/fs/cgroup"

// metricsSampler keeps the previous CPU sample so each call measures usage since the last one.
type metricsSampler struct {
	mu   sync.Mutex
	last cpuSample
}

type cpuSample struct {
	at    time.Time
	busy  float64 // CPU-seconds used
	total float64 // CPU-seconds available (wall time × CPUs for a cgroup; all jiffies for /proc/stat)
	ok    bool
}

func newMetricsSampler() *metricsSampler { return &metricsSampler{} }

// minSampleWindow is the shortest window CPU use is measured over; a call right after another waits for it.
const minSampleWindow = 250 * time.Millisecond

func (a *API) getMetrics(w http.ResponseWriter, r *http.Request) {
	cpus := cpuCount()
	m := agentapi.ExecdMetrics{CPUCount: cpus, Timestamp: nowMS()}
	pct, err := a.metrics.cpuPercent(r, cpus)
	if err != nil {
		writeError(w, err)
		return
	}
	m.CPUUsedPct = pct
	total, used := memory()
	m.MemTotalMiB, m.MemUsedMiB = float64(total)/(1<<20), float64(used)/(1<<20)
	writeJSON(w, http.StatusOK, m)
}

func (s *metricsSampler) cpuPercent(r *http.Request, cpus float64) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.last
	if !prev.ok || time.Since(prev.at) > time.Minute {
		prev = sampleCPU(cpus)
	}
	if wait := minSampleWindow - time.Since(prev.at); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return 0, r.Context().Err()
		}
	}
	cur := sampleCPU(cpus)
	s.last = cur
	if !cur.ok || !prev.ok || cur.total <= prev.total {
		return 0, nil
	}
	pct := (cur.busy - prev.busy) / (cur.total - prev.total) * 100
	return min(max(pct, 0), 100), nil
}

func sampleCPU(cpus float64) cpuSample {
	now := time.Now()
	wall := float64(now.UnixNano()) / 1e9
	if v, ok := readInt(filepath.Join(cgroupRoot, "cpu.stat"), "usage_usec"); ok { // v2
		return cpuSample{at: now, busy: float64(v) / 1e6, total: wall * cpus, ok: true}
	}
	for _, f := range []string{"cpuacct/cpuacct.usage", "cpu,cpuacct/cpuacct.usage"} { // v1
		if v, ok := readInt(filepath.Join(cgroupRoot, f), ""); ok {
			return cpuSample{at: now, busy: float64(v) / 1e9, total: wall * cpus, ok: true}
		}
	}
	return procStat(now)
}

// procStat reads the host's aggregate CPU line: busy is everything but idle and iowait.
func procStat(now time.Time) cpuSample {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuSample{}
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return cpuSample{}
	}
	var total, idle float64
	for i, s := range fields[1:] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return cpuSample{}
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return cpuSample{at: now, busy: total - idle, total: total, ok: true}
}

// cpuCount is the cgroup's CPU quota in CPUs when set, else the CPUs the agent may run on.
func cpuCount() float64 {
	if b, err := os.ReadFile(filepath.Join(cgroupRoot, "cpu.max")); err == nil { // v2: "max 100000" or "150000 100000"
		f := strings.Fields(string(b))
		if len(f) == 2 && f[0] != "max" {
			q, e1 := strconv.ParseFloat(f[0], 64)
			p, e2 := strconv.ParseFloat(f[1], 64)
			if e1 == nil && e2 == nil && q > 0 && p > 0 {
				return q / p
			}
		}
	}
	for _, dir := range []string{"cpu", "cpu,cpuacct"} { // v1
		q, ok1 := readInt(filepath.Join(cgroupRoot, dir, "cpu.cfs_quota_us"), "")
		p, ok2 := readInt(filepath.Join(cgroupRoot, dir, "cpu.cfs_period_us"), "")
		if ok1 && ok2 && q > 0 && p > 0 {
			return float64(q) / float64(p)
		}
	}
	return float64(runtime.GOMAXPROCS(0))
}

// memory is the cgroup's limit and usage in bytes, or the host's total and used (total - available).
func memory() (total, used int64) {
	hostTotal, hostAvail := meminfo()
	total, used = hostTotal, hostTotal-hostAvail
	if lim, ok := readInt(filepath.Join(cgroupRoot, "memory.max"), ""); ok { // v2 ("max" does not parse: no limit)
		total = min(lim, hostTotal)
	} else if lim, ok := readInt(filepath.Join(cgroupRoot, "memory", "memory.limit_in_bytes"), ""); ok && lim > 0 { // v1
		total = min(lim, hostTotal) // v1's "no limit" is a huge number
	}
	if cur, ok := readInt(filepath.Join(cgroupRoot, "memory.current"), ""); ok {
		used = cur
	} else if cur, ok := readInt(filepath.Join(cgroupRoot, "memory", "memory.usage_in_bytes"), ""); ok {
		used = cur
	}
	return total, used
}

func meminfo() (total, avail int64) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			total = v << 10
		case "MemAvailable:":
			avail = v << 10
		}
	}
	return total, avail
}

// readInt reads an integer file, or with key the value of the "key value" line of such a file.
func readInt(path, key string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if key != "" {
		s = ""
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == key {
				s = strings.TrimSpace(v)
				break
			}
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}
