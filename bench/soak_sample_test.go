package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	docker "github.com/docker/docker/client"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// soakSample is what the soak prints at the start, every SOAK_EVERY and at the end: the gateway process's own
// resources (from Caddy's admin /metrics: the Prometheus process and Go collectors) and what it made on the host,
// counted only by the soak's namespace (its labels, its two networks' packet-filter rules).
type soakSample struct {
	At         time.Duration // since the start sample
	Label      string
	RSSMiB     float64
	Goroutines int
	FDs        int
	Containers int
	Volumes    int
	Networks   int
	Rules      int
	Ops        int // calls completed so far
}

// soakProbe takes samples of one gateway and one namespace.
type soakProbe struct {
	admin string // host:port of the gateway's admin endpoint
	ns    string
	cli   *docker.Client
}

// gatewayMetrics reads the three process figures from the admin endpoint's /metrics.
func (p *soakProbe) gatewayMetrics(ctx context.Context) (rssMiB float64, goroutines, fds int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.admin+"/metrics", nil)
	if err != nil {
		return 0, 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reading the gateway's /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, 0, fmt.Errorf("the gateway's /metrics answered %s", resp.Status)
	}
	m, err := parseMetrics(resp.Body, "process_resident_memory_bytes", "go_goroutines", "process_open_fds")
	if err != nil {
		return 0, 0, 0, err
	}
	return m["process_resident_memory_bytes"] / (1 << 20), int(m["go_goroutines"]), int(m["process_open_fds"]), nil
}

// parseMetrics picks unlabelled gauges out of a Prometheus text exposition; each name must be there.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("metric %s missing from /metrics", n)
		}
	}
	return out, nil
}

// take samples everything. A failed read is an error: a sample with a hole would hide a leak.
func (p *soakProbe) take(ctx context.Context, label string, since time.Time, ops int) (soakSample, error) {
	s := soakSample{Label: label, At: time.Since(since), Ops: ops}
	var err error
	if s.RSSMiB, s.Goroutines, s.FDs, err = p.gatewayMetrics(ctx); err != nil {
		return s, err
	}
	f := filters.NewArgs(filters.Arg("label", p.ns+".managed"))
	ctrs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return s, fmt.Errorf("listing containers: %w", err)
	}
	vols, err := p.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return s, fmt.Errorf("listing volumes: %w", err)
	}
	nets, err := p.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return s, fmt.Errorf("listing networks: %w", err)
	}
	s.Containers, s.Volumes, s.Networks = len(ctrs), len(vols.Volumes), len(nets)
	lines, err := p.rules(ctx)
	if err != nil {
		return s, err
	}
	s.Rules = len(lines)
	return s, nil
}

// Our chains and comment tag (sandboxes/docker/netpolicy.go): every rule the gateway adds is in one of the chains
// and names its network's bridge in a comment "sandgate:<bridge>".
var soakChains = []string{"SANDGATE-FWD", "SANDGATE-IN"}

// soakBridges are the bridge interfaces of the namespace's two networks (sandboxes/names.go names them
// <ns>-internal and <ns>-bridge; sandboxes/docker/netpolicy.go's bridgeName derives the interface).
func soakBridges(ns string) []string {
	var out []string
	for _, n := range []string{ns + "-internal", ns + "-bridge"} {
		sum := sha256.Sum256([]byte(n))
		out = append(out, "sg"+hex.EncodeToString(sum[:])[:12])
	}
	return out
}

// rules lists the packet-filter rules (iptables and ip6tables -S) that carry one of the namespace's bridges.
// Other gateways on the host add rules to the same chains, for their own bridges: those are not counted.
func (p *soakProbe) rules(ctx context.Context) ([]soakRule, error) {
	var out []soakRule
	tags := soakBridges(p.ns)
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, chain := range soakChains {
			b, err := exec.CommandContext(ctx, bin, "-w", "-S", chain).CombinedOutput()
			if err != nil {
				if strings.Contains(string(b), "No chain") || strings.Contains(string(b), "does not exist") {
					continue // no gateway made the chain yet
				}
				return nil, fmt.Errorf("%s -S %s: %v %s", bin, chain, err, b)
			}
			for _, line := range strings.Split(string(b), "\n") {
				for _, tag := range tags {
					if strings.Contains(line, "sandgate:"+tag) {
						out = append(out, soakRule{bin: bin, chain: chain, line: line})
					}
				}
			}
		}
	}
	return out, nil
}

type soakRule struct{ bin, chain, line string }

// leftovers names the namespace's containers, volumes and rules, for a failed verdict's report.
func (p *soakProbe) leftovers(ctx context.Context) string {
	var b strings.Builder
	f := filters.NewArgs(filters.Arg("label", p.ns+".managed"))
	if ctrs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		for _, c := range ctrs {
			fmt.Fprintf(&b, "container %v %s %v\n", c.Names, c.State, c.Labels)
		}
	}
	if vols, err := p.cli.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
		for _, v := range vols.Volumes {
			fmt.Fprintf(&b, "volume %s %s %v\n", v.Name, v.CreatedAt, v.Labels)
		}
	}
	if rules, err := p.rules(ctx); err == nil {
		for _, r := range rules {
			fmt.Fprintf(&b, "%s %s\n", r.bin, r.line)
		}
	}
	return b.String()
}

// removeRules deletes the namespace's rules once its networks are gone: a gateway removes a network's rules with
// the network, but the soak's networks are removed by the test's cleanup, after the gateway stopped.
func (p *soakProbe) removeRules(ctx context.Context) error {
	rules, err := p.rules(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rules {
		args := strings.Fields(strings.Replace(r.line, "-A "+r.chain, "-D "+r.chain, 1))
		for i := range args {
			args[i] = strings.Trim(args[i], `"`)
		}
		if out, err := exec.CommandContext(ctx, r.bin, append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s %v: %v %s", r.bin, args, err, out))
		}
	}
	return errors.Join(errs...)
}

// soakTable prints samples as a fixed-width table.
func soakTable(samples []soakSample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %8s %7s %9s %5s %10s %7s %8s %5s %7s\n",
		"sample", "t", "RSS MiB", "goroutines", "fds", "containers", "volumes", "networks", "rules", "calls")
	for _, s := range samples {
		fmt.Fprintf(&b, "%-10s %8s %7.1f %9d %5d %10d %7d %8d %5d %7d\n", s.Label, s.At.Truncate(time.Second),
			s.RSSMiB, s.Goroutines, s.FDs, s.Containers, s.Volumes, s.Networks, s.Rules, s.Ops)
	}
	return b.String()
}

// soakLatencies records every call's duration, by operation, and what went wrong.
type soakLatencies struct {
	mu        sync.Mutex
	all       map[string][]time.Duration
	window    map[string][]time.Duration // since the last periodic print
	ops       int
	refusals  map[string]int // typed refusals by code (quota_exceeded, rate_limited, session_not_ready)
	failures  int
	firstErrs []string
}

func newSoakLatencies() *soakLatencies {
	return &soakLatencies{all: map[string][]time.Duration{}, window: map[string][]time.Duration{}, refusals: map[string]int{}}
}

func (l *soakLatencies) add(op string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all[op] = append(l.all[op], d)
	l.window[op] = append(l.window[op], d)
	l.ops++
}

func (l *soakLatencies) refuse(code string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusals[code]++
}

func (l *soakLatencies) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures++
	if len(l.firstErrs) < 20 {
		l.firstErrs = append(l.firstErrs, err.Error())
	}
}

func (l *soakLatencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

// soakOps is the order the table lists operations in.
var soakOps = []string{"create", "exec", "write", "read", "pty", "ticket", "terminal", "pause", "resume-exec",
	"snapshot", "snapshot-delete", "delete"}

// table prints p50/p99 and counts per operation: of the window since the last call (window true, which starts a
// new window) or of the whole run.
func (l *soakLatencies) table(window bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.all
	if window {
		m = l.window
		l.window = map[string][]time.Duration{}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %-16s %6s %10s %10s\n", "call", "n", "p50 ms", "p99 ms")
	for _, op := range soakOps {
		d := m[op]
		fmt.Fprintf(&b, "  %-16s %6d %10.1f %10.1f\n", op, len(d), ms(testenv.Percentile(d, .5)), ms(testenv.Percentile(d, .99)))
	}
	fmt.Fprintf(&b, "  typed refusals %v, other errors %d\n", l.refusals, l.failures)
	return b.String()
}

// soakVerdict is the pass rule (docs/lifecycle.md, "Soak"): start is the sample after the warm-up (idle, the
// namespace's networks, rules and agent volume made), ref the first periodic sample under load, loaded the later
// samples under load, end the sample after every sandbox and snapshot of the run was deleted (idle again).
//   - counts: containers, volumes, networks and rules at the end equal the start's;
//   - idle process figures: goroutines within start+soakGoroutineSlack and fds within start+soakFDSlack;
//   - RSS never above 1.5x the reference plus 64 MiB, under load or at the end (a leak grows with the calls made;
//     Go's heap target and the engine's answers make a bounded wobble);
//   - no error other than a typed refusal.
func soakVerdict(start, ref soakSample, loaded []soakSample, end soakSample, failures int) []string {
	var bad []string
	if failures > 0 {
		bad = append(bad, fmt.Sprintf("%d errors other than typed refusals", failures))
	}
	counts := func(s soakSample) [4]int { return [4]int{s.Containers, s.Volumes, s.Networks, s.Rules} }
	if counts(end) != counts(start) {
		bad = append(bad, fmt.Sprintf("containers/volumes/networks/rules %v at the end, %v at the start", counts(end), counts(start)))
	}
	if end.Goroutines > start.Goroutines+soakGoroutineSlack {
		bad = append(bad, fmt.Sprintf("%d goroutines at the end, %d at the start", end.Goroutines, start.Goroutines))
	}
	if end.FDs > start.FDs+soakFDSlack {
		bad = append(bad, fmt.Sprintf("%d open fds at the end, %d at the start", end.FDs, start.FDs))
	}
	limit := 1.5*ref.RSSMiB + 64
	for _, s := range append(slices.Clone(loaded), end) {
		if s.RSSMiB > limit {
			bad = append(bad, fmt.Sprintf("RSS %.1f MiB at %s, over %.1f MiB (1.5x the first sample under load + 64)", s.RSSMiB, s.Label, limit))
		}
	}
	return bad
}

// Idle slack: the admin endpoint's own connection, a reaper tick, a pooled engine connection.
const (
	soakGoroutineSlack = 20
	soakFDSlack        = 10
)
