package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	docker "github.com/docker/docker/client"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// Soak settings (make soak sets them): SOAK_TIME is how long traffic runs, SOAK_EVERY how often a sample is
// printed, SOAK_WORKERS the concurrency. SOAK_MAX_ITERATIONS bounds the count of sandbox lifecycles per worker.
const (
	soakKey       = "sk-soak"
	soakSecret    = "soak-ticket-secret-0123456789abcdef0123456789"
	soakCallLimit = 3 * time.Minute // one call; past it the call is an error (a hang)
)

// refusalCodes are the typed refusals the soak counts apart: the gateway said no, with a code and a way to retry.
var refusalCodes = map[string]bool{"quota_exceeded": true, "rate_limited": true, "session_not_ready": true}

// errRefused ends an iteration early on a typed refusal; it is counted, not failed.
var errRefused = errors.New("typed refusal")

type soak struct {
	b       *testing.B
	api     *client.Client
	base    string
	lat     *soakLatencies
	mu      sync.Mutex
	sandbox map[string]bool // created and not yet deleted
	snaps   map[string]bool
}

// BenchmarkSoak is issue 34's soak: a real gateway (the caddy binary, the Docker driver, the REST API, tickets and
// the terminal proxy on one 127.0.0.1 site) under a steady mix from SOAK_WORKERS (8) workers for SOAK_TIME (30m).
// Each worker loops over one sandbox's life: create to ready, two execs, a file write and read, a PTY, a terminal
// ticket and a terminal WebSocket echo, pause, an exec that resumes it, a snapshot and its deletion, delete. It
// prints the gateway's RSS, goroutines and fds and the namespace's containers, volumes, networks and packet-filter
// rules at the start, every SOAK_EVERY (5m) and at the end, with p50/p99 per call; it fails unless the resources
// are flat and every error is a typed refusal (soakVerdict). Only `make soak` runs it (SANDGATE_SOAK=1):
//
//	make soak SOAK_TIME=10m SOAK_EVERY=2m
func BenchmarkSoak(b *testing.B) {
	if os.Getenv("SANDGATE_SOAK") == "" {
		b.Skip("the soak runs only from `make soak` (SANDGATE_SOAK=1)")
	}
	total := envDuration(b, "SOAK_TIME", 30*time.Minute)
	every := envDuration(b, "SOAK_EVERY", 5*time.Minute)
	workers := envInts(b, "SOAK_WORKERS", []int{8})[0]
	maxIter := envInts(b, "SOAK_MAX_ITERATIONS", []int{100000})[0]
	testenv.Integration(b)
	ns := testenv.Unique("sgsoak")
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	probe := &soakProbe{ns: ns, cli: cli}
	// Cleanups run last-registered first: the gateway stops, then the namespace's containers, volumes and networks
	// go (testenv), then its packet-filter rules.
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := probe.removeRules(ctx); err != nil {
			b.Errorf("removing the soak's packet-filter rules: %v", err)
		}
	})
	testenv.RemoveNamespace(b, ns)
	port := testenv.FreePort(b)
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %[1]s
		max_sandboxes 16
		gc_interval 30s
		profile soak {
			image %[2]s
			capabilities filesystem shell python
			cpus 0.5
			memory 256m
			pids 256
			disk 64m
			idle_timeout 30m
		}
	}
}

http://127.0.0.1:%[3]d {
	bind 127.0.0.1
	sandbox_api {
		api_key %[4]s
		data_dir %[5]s
	}
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/* terminal pty
}
`, ns, testenv.Image(b, "base"), port, soakKey, b.TempDir())
	gw := testenv.StartGateway(b, caddyfile, testenv.GatewayOptions{Env: []string{tickets.EnvSecret + "=" + soakSecret}})
	probe.admin = gw.AdminAddr
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	api := client.New(base, soakKey)
	transport := &http.Transport{MaxIdleConnsPerHost: 2 * workers}
	api.HTTP = &http.Client{Transport: transport, Timeout: soakCallLimit}
	s := &soak{b: b, api: api, base: base, lat: newSoakLatencies(), sandbox: map[string]bool{}, snaps: map[string]bool{}}

	// Ctrl-C or SIGTERM ends the traffic early; the clean-up and the end sample still run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b.Cleanup(s.deleteLeftovers) // also when the benchmark fails half-way

	// Warm-up: one whole iteration makes what a gateway makes once (the namespace's network and its rules, the
	// snapshot store); its calls are not counted.
	warm := &soak{b: b, api: api, base: base, lat: newSoakLatencies(), sandbox: s.sandbox, snaps: s.snaps}
	if err := warm.iteration(ctx, 0); err != nil {
		b.Fatalf("warm-up iteration: %v", err)
	}
	transport.CloseIdleConnections()
	t0 := time.Now()
	var samples []soakSample
	sample := func(label string) soakSample {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		smp, err := probe.take(sctx, label, t0, s.lat.count())
		if err != nil {
			b.Fatalf("sample %s: %v", label, err)
		}
		samples = append(samples, smp)
		fmt.Printf("soak %s (t=%s, load %s):\n%s", label, smp.At.Truncate(time.Second), loadAverage(), soakTable([]soakSample{smp}))
		return smp
	}
	start := sample("start")
	fmt.Printf("soak: %d workers for %s, a sample every %s; namespace %s\n", workers, total, every, ns)

	runCtx, cancel := context.WithTimeout(ctx, total)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The end of the run stops new iterations; the ones under way finish (their calls end only with an
			// interrupt), so the last calls are measured like the others and nothing is abandoned half-made.
			for i := 0; i < maxIter && runCtx.Err() == nil; i++ {
				if err := s.iteration(ctx, w); err != nil && ctx.Err() == nil && !errors.Is(err, errRefused) {
					b.Logf("worker %d: %v", w, err)
				}
			}
		}()
	}
	var loaded []soakSample
	tick := time.NewTicker(every)
	for done := false; !done; {
		select {
		case <-runCtx.Done():
			done = true
		case <-tick.C:
			loaded = append(loaded, sample(fmt.Sprintf("t+%s", time.Since(t0).Round(time.Minute))))
			fmt.Print(s.lat.table(true))
		}
	}
	tick.Stop()
	wg.Wait()
	if len(loaded) == 0 { // a run shorter than one period: its last moment under load is the reference
		loaded = append(loaded, sample("loaded"))
	}
	fmt.Printf("soak: traffic stopped after %s (%s)\n", time.Since(t0).Round(time.Second), context.Cause(runCtx))

	// The end: everything the soak made is deleted, then the gateway is sampled once it is idle again (the
	// deletions' goroutines and connections end shortly after their answers), for at most a minute.
	s.deleteLeftovers()
	transport.CloseIdleConnections()
	var end soakSample
	for deadline := time.Now().Add(time.Minute); ; {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		end, err = probe.take(sctx, "end", t0, s.lat.count())
		cancel()
		if err != nil {
			b.Fatalf("end sample: %v", err)
		}
		if len(soakVerdict(start, loaded[0], nil, end, 0)) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // poll the idle state; the verdict below judges what is left after the minute
	}
	samples = append(samples, end)
	fmt.Printf("soak end (load %s):\n%s", loadAverage(), soakTable(samples))
	fmt.Print("whole run:\n" + s.lat.table(false))
	if len(s.lat.firstErrs) > 0 {
		fmt.Printf("first errors:\n  %s\n", strings.Join(s.lat.firstErrs, "\n  "))
	}
	b.ReportMetric(float64(s.lat.count()), "calls")
	b.ReportMetric(float64(s.lat.failures), "errors")
	b.ReportMetric(end.RSSMiB, "end-rss-MiB")
	if bad := soakVerdict(start, loaded[0], loaded[1:], end, s.lat.failures); len(bad) > 0 {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fmt.Print(probe.leftovers(sctx))
		b.Fatalf("soak failed:\n  %s", strings.Join(bad, "\n  "))
	}
	fmt.Println("soak: PASS (flat resources, no error other than typed refusals)")
}

// iteration is one sandbox's life. It returns the first error (after counting it); the sandbox is deleted in any
// case.
func (s *soak) iteration(ctx context.Context, w int) (err error) {
	var sb *client.Sandbox
	if err := s.call(ctx, "create", func(ctx context.Context) error {
		var err error
		if sb, err = s.api.CreateSandbox(ctx, "soak", 600); err != nil {
			return err
		}
		s.track(s.sandbox, sb.ID, true)
		_, err = s.api.WaitReady(ctx, sb.ID, 50*time.Millisecond)
		return err
	}); err != nil {
		if sb != nil && sb.ID != "" {
			s.deleteSandbox(sb.ID)
		}
		return err
	}
	id := sb.ID
	defer func() {
		if derr := s.call(ctx, "delete", func(ctx context.Context) error { return s.api.DeleteSandbox(ctx, id) }); derr == nil {
			s.track(s.sandbox, id, false)
		} else if err == nil {
			err = derr
		}
	}()
	execOK := func(op, marker string) error {
		return s.call(ctx, op, func(ctx context.Context) error {
			res, err := s.api.Shell(ctx, id, "echo "+marker+"-$((6*7))", 60)
			if err != nil {
				return err
			}
			if !res.Success || !strings.Contains(res.Output, marker+"-42") {
				return fmt.Errorf("shell/exec in %s answered %+v", id, res)
			}
			return nil
		})
	}
	for range 2 {
		if err := execOK("exec", "soak"); err != nil {
			return err
		}
	}
	content := strings.Repeat(fmt.Sprintf("worker %d of the soak\n", w), 200)
	if err := s.call(ctx, "write", func(ctx context.Context) error {
		return s.api.WriteFile(ctx, id, "soak/notes.txt", content)
	}); err != nil {
		return err
	}
	if err := s.call(ctx, "read", func(ctx context.Context) error {
		got, err := s.api.ReadFile(ctx, id, "soak/notes.txt")
		if err == nil && got != content {
			err = fmt.Errorf("read back %d bytes of %s, wrote %d", len(got), id, len(content))
		}
		return err
	}); err != nil {
		return err
	}
	if err := s.terminal(ctx, id); err != nil {
		return err
	}
	if err := s.call(ctx, "pause", func(ctx context.Context) error {
		return s.api.Do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/pause", nil, nil)
	}); err != nil {
		return err
	}
	if err := execOK("resume-exec", "resumed"); err != nil {
		return err
	}
	var snap struct {
		ID string `json:"id"`
	}
	if err := s.call(ctx, "snapshot", func(ctx context.Context) error {
		err := s.api.Do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/snapshots", map[string]any{"name": "soak"}, &snap)
		if err == nil {
			s.track(s.snaps, snap.ID, true)
		}
		return err
	}); err != nil {
		return err
	}
	if err := s.call(ctx, "snapshot-delete", func(ctx context.Context) error {
		return s.api.Do(ctx, http.MethodDelete, "/v1/snapshots/"+snap.ID, nil, nil)
	}); err != nil {
		return err
	}
	s.track(s.snaps, snap.ID, false)
	return nil
}

// terminal opens a PTY, mints a one-time terminal ticket and echoes through the terminal WebSocket.
func (s *soak) terminal(ctx context.Context, id string) error {
	var pty agentapi.PTYSession
	if err := s.call(ctx, "pty", func(ctx context.Context) error {
		return s.api.Do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/pty", map[string]any{"cols": 80, "rows": 24}, &pty)
	}); err != nil {
		return err
	}
	var tk struct {
		Ticket string `json:"ticket"`
	}
	if err := s.call(ctx, "ticket", func(ctx context.Context) error {
		return s.api.Do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/tickets", map[string]any{"scope": "terminal", "permission": "write"}, &tk)
	}); err != nil {
		return err
	}
	return s.call(ctx, "terminal", func(ctx context.Context) error {
		ws := strings.Replace(s.base, "http://", "ws://", 1) + "/sandboxes/" + id + "/terminal/ws?pty=" + pty.ID + "&ticket=" + tk.Ticket
		c, resp, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPClient: s.api.HTTP})
		if err != nil {
			if resp != nil {
				return fmt.Errorf("terminal of %s: %s: %w", id, resp.Status, err)
			}
			return fmt.Errorf("terminal of %s: %w", id, err)
		}
		defer c.CloseNow()
		if err := testenv.PTYRun(ctx, c, "echo term-$((40+2))", "term-42"); err != nil {
			return fmt.Errorf("terminal echo in %s: %w", id, err)
		}
		return c.Close(websocket.StatusNormalClosure, "")
	})
}

// call times one operation and sorts its error: a typed refusal is counted and ends the iteration (errRefused),
// anything else is a failure. A call cut by the end of the run is neither.
func (s *soak) call(ctx context.Context, op string, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, soakCallLimit)
	defer cancel()
	t0 := time.Now()
	err := f(cctx)
	d := time.Since(t0)
	switch {
	case err == nil:
		s.lat.add(op, d)
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	var ae *client.Error
	if errors.As(err, &ae) && refusalCodes[ae.Code] {
		s.lat.refuse(ae.Code)
		return errRefused
	}
	err = fmt.Errorf("%s: %w", op, err)
	s.lat.fail(err)
	return err
}

func (s *soak) track(set map[string]bool, id string, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		set[id] = true
	} else {
		delete(set, id)
	}
}

// deleteSandbox deletes one sandbox outside the run's context (the run may be over).
func (s *soak) deleteSandbox(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), soakCallLimit)
	defer cancel()
	if err := s.api.DeleteSandbox(ctx, id); err == nil {
		s.track(s.sandbox, id, false)
	}
}

// deleteLeftovers deletes what an interrupted iteration left: sandboxes and snapshots, through the API (the
// namespace's clean-up removes the rest directly from the engine if the gateway is gone).
func (s *soak) deleteLeftovers() {
	s.mu.Lock()
	var ids, snaps []string
	for id := range s.sandbox {
		ids = append(ids, id)
	}
	for id := range s.snaps {
		snaps = append(snaps, id)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), soakCallLimit)
	defer cancel()
	for _, id := range snaps {
		if err := s.api.Do(ctx, http.MethodDelete, "/v1/snapshots/"+id, nil, nil); err == nil {
			s.track(s.snaps, id, false)
		}
	}
	for _, id := range ids {
		s.deleteSandbox(id)
	}
}

// envDuration reads a duration setting (SOAK_TIME=10m).
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a duration such as 10m", name, v)
	}
	return d
}
