package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// timings aggregates named durations over one window.
type timings struct {
	mu sync.Mutex
	d  map[string][]time.Duration
}

func (t *timings) add(name string, d time.Duration) {
	t.mu.Lock()
	if t.d == nil {
		t.d = map[string][]time.Duration{}
	}
	t.d[name] = append(t.d[name], d)
	t.mu.Unlock()
}

func (t *timings) take() map[string][]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.d
	t.d = nil
	return d
}

func summarise(m map[string][]time.Duration) string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		v := m[k]
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		var sum time.Duration
		for _, x := range v {
			sum += x
		}
		fmt.Fprintf(&b, "    %-40s n=%-4d mean=%8.1fms p50=%8.1fms max=%8.1fms\n", k, len(v),
			float64(sum.Microseconds())/1000/float64(len(v)), float64(v[len(v)/2].Microseconds())/1000,
			float64(v[len(v)-1].Microseconds())/1000)
	}
	return b.String()
}

var idRe = regexp.MustCompile(`/[0-9a-f]{64}|/sgd-[^/?]+|/v1\.[0-9]+`)

// stepHandler collects the launch steps of the Manager's debug log.
type stepHandler struct{ t *timings }

func (h stepHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h stepHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != sandboxes.LaunchStepsMessage {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if strings.HasSuffix(a.Key, "_ms") {
			h.t.add("step "+a.Key, time.Duration(a.Value.Float64()*float64(time.Millisecond)))
		}
		return true
	})
	return nil
}
func (h stepHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h stepHandler) WithGroup(string) slog.Handler      { return h }

// arpCache is the kernel's IPv4 neighbour table, all namespaces together: its entries and how often it was full.
func arpCache() string {
	b, err := os.ReadFile("/proc/net/stat/arp_cache")
	if err != nil {
		return "?"
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		return "?"
	}
	f := strings.Fields(lines[1])
	if len(f) < 13 {
		return "?"
	}
	entries, _ := strconv.ParseUint(f[0], 16, 64)
	fulls, _ := strconv.ParseUint(f[12], 16, 64)
	return fmt.Sprintf("%d, %d", entries, fulls)
}

func shell(cmd string) string {
	out, _ := exec.Command("sh", "-c", cmd).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// BenchmarkDensityLimit finds where creates stop or slow on this host (issue 19): it creates base sandboxes 4 at a
// time (SANDGATE_DENSITY_CONCURRENCY) on the profile's one network until SANDGATE_LIMIT_N (default 1000) or the
// first failure, and prints every 50 (lines starting `density:` on stderr):
//   - each launch step's time (the Manager's launch trace) and each Engine API call's, timed by a proxy in front of
//     the engine's socket, so a step or call that grows with n shows;
//   - the host's tables that grow with the sandboxes: iptables rules, conntrack entries, neighbour (ARP) entries
//     of the host and of the kernel's one table for every namespace (/proc/net/stat/arp_cache entries and
//     table_fulls), "neighbor table overflow" lines in the kernel log, the bridge's ports;
//   - load, available memory, this process's RSS, goroutines and heap.
//
// net/http/pprof answers on 127.0.0.1:6061 while it runs (block and mutex profiles on). SANDGATE_LIMIT_HOLD_FILE
// keeps the sandboxes until that file is removed (to measure the host at the limit); SANDGATE_LIMIT_SPARES sets the
// profile's network_spares. Everything it made is deleted at the end.
//
//	SANDGATE_LIMIT_N=1023 go test -run x -bench 'BenchmarkDensityLimit$' -benchtime 1x -timeout 1h ./bench
func BenchmarkDensityLimit(b *testing.B) {
	n := envInts(b, "SANDGATE_LIMIT_N", []int{1000})[0]
	conc := envInts(b, "SANDGATE_DENSITY_CONCURRENCY", []int{4})[0]
	spares := envInts(b, "SANDGATE_LIMIT_SPARES", []int{0})[0]
	ctx := context.Background()
	runtime.SetBlockProfileRate(10000)
	runtime.SetMutexProfileFraction(5)
	go http.ListenAndServe("127.0.0.1:6061", nil)

	var engine, steps timings
	// A timing proxy in front of the engine's socket.
	sock := filepath.Join(b.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme = "http"; r.Out.URL.Host = "docker" },
		FlushInterval: -1,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", "/var/run/docker.sock")
		}, MaxIdleConnsPerHost: 64},
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		rp.ServeHTTP(w, r)
		if strings.HasSuffix(r.URL.Path, "/events") {
			return
		}
		engine.add("engine "+r.Method+" "+idRe.ReplaceAllString(r.URL.Path, "/X"), time.Since(began))
	}))

	ns := testenv.Unique("sgd")
	testenv.RemoveNamespace(b, ns)
	drv, err := docker.New("unix://" + sock)
	if err != nil {
		b.Fatal(err)
	}
	st := sandboxes.NewBoltStore(filepath.Join(b.TempDir(), "store.db"))
	logger := slog.New(stepHandler{&steps})
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: ns}, drv, st, logger)
	if err != nil {
		b.Fatal(err)
	}
	p := benchProfile("dense")
	p.Image = testenv.Image(b, "base")
	p.NetworkSpares = spares
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour, OrphanMinAge: time.Hour,
		StartTimeout: 5 * time.Minute}
	if err := mgr.Apply(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var ids []string
	b.Cleanup(func() {
		began := time.Now()
		deleteSandboxes(ctx, b, mgr, ids, 8)
		sayf(b, "deleted %d in %s", len(ids), time.Since(began))
		mgr.Close()
		st.Close()
	})
	bridge := ""
	window := time.Now()
	var failed error
	for len(ids) < n && failed == nil {
		var wg sync.WaitGroup
		for range min(conc, n-len(ids)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				began := time.Now()
				sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: "dense", Owner: service.DefaultOwner})
				if err == nil {
					mu.Lock()
					ids = append(ids, sb.ID)
					mu.Unlock()
					rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
					_, err = mgr.EnsureRunning(rctx, sb.ID)
					cancel()
				}
				steps.add("whole create+ready", time.Since(began))
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if bridge == "" {
			bridge = shell("docker network inspect -f '{{index .Options \"com.docker.network.bridge.name\"}}' " + mgr.InternalNetwork())
		}
		if len(ids)%50 < conc || failed != nil || len(ids) >= n {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			el := time.Since(window)
			sayf(b, "=== at %d sandboxes (%s): window %.1fs; load %s; mem avail %s MB; rss %.0f MB; goroutines %d; heap %d MB\n"+
				"    iptables-save %s lines; ip6tables-save %s; conntrack %s; neigh4 %s (bridge %s); neigh6 %s; bridge ports %s; dmesg overflow %s; arp_cache entries, table_fulls %s\n%s%s",
				len(ids), time.Now().UTC().Format("15:04:05"), el.Seconds(), shell("cut -d' ' -f1-3 /proc/loadavg"),
				shell("awk '/MemAvailable/{print int($2/1024)}' /proc/meminfo"), selfRSSMB(), runtime.NumGoroutine(), ms.HeapAlloc>>20,
				shell("iptables-save | wc -l"), shell("ip6tables-save | wc -l"), shell("cat /proc/sys/net/netfilter/nf_conntrack_count"),
				shell("ip -4 neigh show | wc -l"), shell("ip -4 neigh show dev "+bridge+" | wc -l"), shell("ip -6 neigh show | wc -l"),
				shell("ls /sys/class/net/"+bridge+"/brif 2>/dev/null | wc -l"), shell("dmesg 2>/dev/null | grep -c 'table overflow'"),
				arpCache(),
				summarise(steps.take()), summarise(engine.take()))
			window = time.Now()
			if f := os.Getenv("SANDGATE_LIMIT_PAUSE_FILE"); f != "" {
				for {
					if _, err := os.Stat(f); err != nil {
						break
					}
					time.Sleep(time.Second)
				}
			}
		}
	}
	if failed != nil {
		sayf(b, "stopped at %d: %v", len(ids), failed)
	}
	if f := os.Getenv("SANDGATE_LIMIT_HOLD_FILE"); f != "" {
		sayf(b, "holding while %s exists", f)
		for {
			if _, err := os.Stat(f); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
	}
}
