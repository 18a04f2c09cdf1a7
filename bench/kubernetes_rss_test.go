package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clusterComponents are the test cluster's processes, as scripts/cluster.sh records them in $STATE/pids/<name>.pid
// ("pid binary"), in the order the footprint table prints them.
var clusterComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
	"containerd", "agent-sandbox-controller", "local-path-provisioner"}

// shimsKey is the summed RSS of the containerd shims of the cluster's own containerd (one per Pod).
const shimsKey = "containerd shims"

// clusterRSS reads the resident memory of the test cluster's processes from /proc, the way `cluster.sh status` does:
// a recorded pid counts only while /proc/<pid>/exe is still the recorded binary (never a process that reused it).
type clusterRSS struct {
	state string // scripts/cluster.sh's state directory
	sock  string // the cluster's containerd socket, named on its shims' command lines
}

func newClusterRSS(state string) *clusterRSS {
	return &clusterRSS{state: state, sock: filepath.Join(state, "containerd", "containerd.sock")}
}

// sample is each component's RSS in KiB; a component that does not run is absent.
func (c *clusterRSS) sample() map[string]int64 {
	out := map[string]int64{}
	for _, name := range clusterComponents {
		b, err := os.ReadFile(filepath.Join(c.state, "pids", name+".pid"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			continue
		}
		if exe, err := os.Readlink("/proc/" + f[0] + "/exe"); err != nil || exe != f[1] {
			continue
		}
		if kb, ok := procRSSKiB(f[0]); ok {
			out[name] = kb
		}
	}
	var shims int64
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmd, []byte("containerd-shim")) || !bytes.Contains(cmd, []byte(c.sock)) {
			continue
		}
		if kb, ok := procRSSKiB(p.Name()); ok {
			shims += kb
		}
	}
	out[shimsKey] = shims
	return out
}

func procRSSKiB(pid string) (int64, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb, err == nil
			}
		}
	}
	return 0, false
}

// rssSampler samples the cluster every interval until stopped, keeping every sample of every component.
type rssSampler struct {
	c       *clusterRSS
	mu      sync.Mutex
	samples map[string][]int64
	stop    chan struct{}
	done    chan struct{}
}

func (c *clusterRSS) startSampling(every time.Duration) *rssSampler {
	s := &rssSampler{c: c, samples: map[string][]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.add(c.sample())
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) add(m map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total int64
	for k, v := range m {
		s.samples[k] = append(s.samples[k], v)
		if k != shimsKey {
			total += v
		}
	}
	s.samples["total"] = append(s.samples["total"], total)
}

// finish stops the sampler and returns each component's median and peak in MiB, and the number of samples.
func (s *rssSampler) finish() (median, peak map[string]float64, n int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	median, peak = map[string]float64{}, map[string]float64{}
	for k, v := range s.samples {
		v = append([]int64(nil), v...)
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		median[k] = float64(v[len(v)/2]) / 1024
		peak[k] = float64(v[len(v)-1]) / 1024
	}
	return median, peak, len(s.samples["total"])
}

// footprintTable prints the idle and busy RSS of every component in MiB.
func footprintTable(idle, busyMedian, busyPeak map[string]float64, idleN, busyN int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %10s %12s %10s\n", "RSS MiB", "idle p50", "bench p50", "bench max")
	for _, k := range append(append([]string(nil), clusterComponents...), "total", shimsKey) {
		if _, ok := busyPeak[k]; !ok {
			if _, ok := idle[k]; !ok {
				continue
			}
		}
		fmt.Fprintf(&b, "%-26s %10.0f %12.0f %10.0f\n", k, idle[k], busyMedian[k], busyPeak[k])
	}
	fmt.Fprintf(&b, "(total: the components above, without the shims; %d idle samples, %d during the bench)", idleN, busyN)
	return b.String()
}
