// Package bench measures sandgate against baselines taken in the same run. Run by hand:
//
//	go test -run x -bench Lifecycle -benchtime 1x ./bench
//
// Nothing here asserts on speed; the figures are printed with their ratios to the baseline.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

type lifecycleBench struct {
	b     *testing.B
	ns    string
	image string
	mgr   *sandboxes.Manager
	cli   *client.Client
}

func newLifecycleBench(b *testing.B, profile sandboxes.Profile, maxStarts int) *lifecycleBench {
	b.Helper()
	image := testenv.Image(b, "base")
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	lb := &lifecycleBench{b: b, ns: testenv.Unique("sgb"), image: image, cli: cli}
	testenv.RemoveNamespace(b, lb.ns)
	drv, err := docker.New("")
	if err != nil {
		b.Fatal(err)
	}
	lb.mgr, err = sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: lb.ns}, drv,
		sandboxes.NewBoltStore(filepath.Join(b.TempDir(), "store.db")), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	profile.Image = image
	ctx := context.Background()
	if err := lb.mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{profile}, MaxConcurrentStarts: maxStarts,
		WarmRefillPerSecond: 20, GCInterval: time.Hour}); err != nil {
		b.Fatal(err)
	}
	if err := lb.mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		lb.mgr.Close()
		cli.Close()
	})
	return lb
}

func benchProfile(id string) sandboxes.Profile {
	return sandboxes.Profile{ID: id, Resources: sandboxes.Resources{CPUs: 0.5, Memory: "256m", Disk: "64m", Pids: 128},
		Capabilities: []string{sandboxes.CapShell, sandboxes.CapPython, sandboxes.CapFilesystem}}
}

func (lb *lifecycleBench) ready(id string) sandboxes.Target {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t, err := lb.mgr.EnsureRunning(ctx, id)
	if err != nil {
		lb.b.Fatal(err)
	}
	return t
}

// agentExec runs `true` in the sandbox the way a client's first command gets there: through the agent, on the
// Manager's agent connection pool, which the gateway's API uses (a warm member's probe left its connection open).
func (lb *lifecycleBench) agentExec(t sandboxes.Target) {
	res, err := agentapi.NewClientFor(t.Addr, t.Token, lb.mgr.AgentHTTPClient()).Exec(context.Background(), agentapi.ExecRequest{Argv: []string{"true"}})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		lb.b.Fatalf("first exec: %v %+v", err, res)
	}
}

// engineExec runs `true` in the sandbox through the Engine API (`docker exec`), the baseline.
func (lb *lifecycleBench) engineExec(id string) {
	ctx := context.Background()
	ex, err := lb.cli.ContainerExecCreate(ctx, lb.mgr.ContainerName(id), container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true})
	if err != nil {
		lb.b.Fatal(err)
	}
	att, err := lb.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		lb.b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, att.Reader)
	att.Close()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkLifecycleWarmClaim: time from Create to a ready sandbox out of the warm pool, and to its first exec.
func BenchmarkLifecycleWarmClaim(b *testing.B) {
	p := benchProfile("warm")
	p.WarmPoolSize = 4
	lb := newLifecycleBench(b, p, 4)
	const samples = 20
	var toReady, toExec, execOnly []time.Duration
	for range samples {
		deadline := time.Now().Add(2 * time.Minute)
		for lb.mgr.WarmReady() == 0 {
			if time.Now().After(deadline) {
				b.Fatal("warm pool never refilled")
			}
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		sb, err := lb.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "warm"})
		if err != nil {
			b.Fatal(err)
		}
		if sb.LaunchType != sandboxes.LaunchWarm || sb.Status != sandboxes.StatusReady {
			b.Fatalf("not a warm claim: %+v", sb)
		}
		target := lb.ready(sb.ID)
		toReady = append(toReady, time.Since(start))
		lb.agentExec(target)
		toExec = append(toExec, time.Since(start))
		// Baseline: `docker exec true` on the now-claimed sandbox, what the engine's own exec costs.
		again := time.Now()
		lb.engineExec(sb.ID)
		execOnly = append(execOnly, time.Since(again))
		_ = lb.mgr.Delete(context.Background(), sb.ID)
	}
	b.ReportMetric(ms(testenv.Percentile(toReady, .5)), "ready-p50-ms")
	b.ReportMetric(ms(testenv.Percentile(toReady, .95)), "ready-p95-ms")
	b.ReportMetric(ms(testenv.Percentile(toExec, .5)), "exec-p50-ms")
	b.ReportMetric(ms(testenv.Percentile(toExec, .95)), "exec-p95-ms")
	b.ReportMetric(ms(testenv.Percentile(execOnly, .5)), "exec-alone-p50-ms")
	b.Logf("warm claim to ready: p50 %.2f ms, p95 %.2f ms (target p50 < 50 ms); to first exec: p50 %.1f ms, p95 %.1f ms; "+
		"docker exec alone (Engine API, same sandbox, right after): p50 %.1f ms, p95 %.1f ms",
		ms(testenv.Percentile(toReady, .5)), ms(testenv.Percentile(toReady, .95)), ms(testenv.Percentile(toExec, .5)), ms(testenv.Percentile(toExec, .95)),
		ms(testenv.Percentile(execOnly, .5)), ms(testenv.Percentile(execOnly, .95)))
}

// dockerRunToHealth is the baseline: `docker run` of the same image until its agent answers /health, with the
// flags given (none: Docker's default bridge).
func dockerRunToHealth(b *testing.B, image string, flags ...string) time.Duration {
	name := testenv.Unique("sgb-run")
	start := time.Now()
	args := append([]string{"run", "-d", "--name", name, "--label", "sandgate.bench=1", "-e", "SANDGATE_AGENT_TOKEN=bench"}, flags...)
	out, err := exec.Command("docker", append(args, image)...).CombinedOutput()
	if err != nil {
		b.Fatalf("docker run: %v %s", err, out)
	}
	defer exec.Command("docker", "rm", "-f", "-v", name).Run()
	ip, err := exec.Command("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name).Output()
	if err != nil {
		b.Fatal(err)
	}
	url := fmt.Sprintf("http://%s:7777/health", strings.TrimSpace(string(ip)))
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(start)
			}
		}
		if time.Since(start) > time.Minute {
			b.Fatal("docker run baseline never became healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkLifecycleColdCreate: Create to ready (cold) against `docker run` to /health, alternating, and 20
// concurrent cold creates against a single one.
func BenchmarkLifecycleColdCreate(b *testing.B) {
	lb := newLifecycleBench(b, benchProfile("cold"), 20)
	const samples = 10
	var cold, baseline []time.Duration
	for range samples {
		baseline = append(baseline, dockerRunToHealth(b, lb.image))
		start := time.Now()
		sb, err := lb.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "cold"})
		if err != nil {
			b.Fatal(err)
		}
		lb.ready(sb.ID)
		cold = append(cold, time.Since(start))
		_ = lb.mgr.Delete(context.Background(), sb.ID)
	}
	c50, base50 := testenv.Percentile(cold, .5), testenv.Percentile(baseline, .5)
	b.ReportMetric(ms(c50), "cold-p50-ms")
	b.ReportMetric(ms(base50), "docker-run-p50-ms")
	b.ReportMetric(float64(c50)/float64(base50), "cold/docker-run")
	b.Logf("cold create to ready: p50 %.0f ms, p95 %.0f ms; docker run to /health: p50 %.0f ms, p95 %.0f ms; ratio %.2fx (target <= 1.2x)",
		ms(c50), ms(testenv.Percentile(cold, .95)), ms(base50), ms(testenv.Percentile(baseline, .95)), float64(c50)/float64(base50))

	const parallel = 20
	var mu sync.Mutex
	var conc []time.Duration
	var wg sync.WaitGroup
	var ids []string
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			sb, err := lb.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: "cold"})
			if err != nil {
				b.Error(err)
				return
			}
			lb.ready(sb.ID)
			mu.Lock()
			conc = append(conc, time.Since(start))
			ids = append(ids, sb.ID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	p95 := testenv.Percentile(conc, .95)
	b.ReportMetric(ms(p95), "concurrent20-p95-ms")
	b.ReportMetric(float64(p95)/float64(c50), "concurrent20-p95/single")
	b.Logf("%d concurrent cold creates: p50 %.0f ms, p95 %.0f ms = %.2fx a single cold create (target <= 3x)",
		parallel, ms(testenv.Percentile(conc, .5)), ms(p95), float64(p95)/float64(c50))
	for _, id := range ids {
		_ = lb.mgr.Delete(context.Background(), id)
	}

	// The engine's own ceiling: 20 concurrent `docker run`s of the same image to /health.
	var base []time.Duration
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := dockerRunToHealth(b, lb.image)
			mu.Lock()
			base = append(base, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	bp95 := testenv.Percentile(base, .95)
	b.ReportMetric(ms(bp95), "docker-run-concurrent20-p95-ms")
	b.Logf("%d concurrent docker runs to /health: p50 %.0f ms, p95 %.0f ms = %.2fx a single docker run; sandgate's p95 is %.2fx this",
		parallel, ms(testenv.Percentile(base, .5)), ms(bp95), float64(bp95)/float64(base50), float64(p95)/float64(bp95))
}
