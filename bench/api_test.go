// Package bench holds benchmarks that run the real gateway against real containers and print ratios against a
// baseline measured in the same run. Run by hand, e.g.
//
//	go test ./bench -run '^$' -bench API -benchtime 200x
package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

const apiBenchKey = "sk-bay-bench"

type apiGateway struct {
	url string
	ns  string
	cli *docker.Client
	gw  *testenv.Gateway
}

// startAPIGateway runs the real gateway with the API and two profiles: cold (no pool) and warm (pool of 1).
func startAPIGateway(b *testing.B) *apiGateway {
	b.Helper()
	testenv.Integration(b)
	ns := testenv.Unique("sgbench")
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	image := testenv.Image(b, "base")
	testenv.RemoveNamespace(b, ns)
	b.Cleanup(func() { cli.Close() })
	port := testenv.FreePort(b)
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %[1]s
		on_exit destroy
		profile cold {
			image %[2]s
			capabilities filesystem shell python
			memory 256m
		}
		profile warm {
			image %[2]s
			capabilities filesystem shell python
			memory 256m
			warm_pool 1
		}
	}
}

http://127.0.0.1:%[3]d {
	bind 127.0.0.1
	sandbox_api {
		api_key %[4]s
		data_dir %[5]s
	}
}
`, ns, image, port, apiBenchKey, b.TempDir())
	gw := testenv.StartGateway(b, caddyfile, testenv.GatewayOptions{})
	return &apiGateway{url: fmt.Sprintf("http://127.0.0.1:%d", port), ns: ns, cli: cli, gw: gw}
}

func (g *apiGateway) agentOf(b *testing.B, id string) (addr, token string) {
	b.Helper()
	ctx := context.Background()
	list, err := g.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", g.ns+".id="+id))})
	if err != nil || len(list) != 1 {
		b.Fatalf("finding the container of %s: %v (%d found)", id, err, len(list))
	}
	info, err := g.cli.ContainerInspect(ctx, list[0].ID)
	if err != nil {
		b.Fatal(err)
	}
	_, token = g.gw.Agent(b, id)
	for _, n := range info.NetworkSettings.Networks {
		if n.IPAddress != "" {
			addr = n.IPAddress + ":7777"
		}
	}
	if addr == "" || token == "" {
		b.Fatalf("no agent address or token for %s", id)
	}
	return addr, token
}

// BenchmarkAPIShellExec compares shell/exec of `true` through the whole stack (client -> Caddy -> API -> agent)
// with the same command sent to the agent directly.
func BenchmarkAPIShellExec(b *testing.B) {
	g := startAPIGateway(b)
	ctx := context.Background()
	c := client.New(g.url, apiBenchKey)
	sb, err := c.CreateSandbox(ctx, "cold", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, sb.ID)
	if _, err := c.WaitReady(ctx, sb.ID, 50*time.Millisecond); err != nil {
		b.Fatal(err)
	}
	if res, err := c.Shell(ctx, sb.ID, "true", 30); err != nil || !res.Success {
		b.Skipf("shell/exec does not work in this image yet: %+v %v", res, err)
	}
	addr, token := g.agentOf(b, sb.ID)
	direct := &http.Client{}
	agentExec := func() error {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/exec", bytes.NewReader([]byte(`{"cmd":"true"}`)))
		req.Header.Set("X-Sandgate-Token", token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := direct.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("agent answered %s", resp.Status)
		}
		return nil
	}
	if err := agentExec(); err != nil {
		b.Fatal(err)
	}
	viaAPI := make([]time.Duration, 0, b.N)
	viaAgent := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := agentExec(); err != nil {
			b.Fatal(err)
		}
		viaAgent = append(viaAgent, time.Since(t0))
		t0 = time.Now()
		if _, err := c.Shell(ctx, sb.ID, "true", 30); err != nil {
			b.Fatal(err)
		}
		viaAPI = append(viaAPI, time.Since(t0))
	}
	b.StopTimer()
	a50, a99 := testenv.Percentile(viaAPI, 0.5), testenv.Percentile(viaAPI, 0.99)
	d50, d99 := testenv.Percentile(viaAgent, 0.5), testenv.Percentile(viaAgent, 0.99)
	b.ReportMetric(float64(a50.Microseconds()), "api-p50-us")
	b.ReportMetric(float64(a99.Microseconds()), "api-p99-us")
	b.ReportMetric(float64(d50.Microseconds()), "agent-p50-us")
	b.ReportMetric(float64(d99.Microseconds()), "agent-p99-us")
	b.Logf("shell/exec `true` over %d runs: API p50 %v p99 %v; agent directly p50 %v p99 %v; ratio p50 %.2fx p99 %.2fx",
		b.N, a50, a99, d50, d99, float64(a50)/float64(d50), float64(a99)/float64(d99))
}

// BenchmarkAPICreateToReady measures what a client sees from POST /v1/sandboxes to status ready, polling every
// 20 ms: from a warm pool (profile warm) and cold (profile cold).
func BenchmarkAPICreateToReady(b *testing.B) {
	g := startAPIGateway(b)
	ctx := context.Background()
	c := client.New(g.url, apiBenchKey)
	measure := func(profile string) time.Duration {
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, profile, 600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.WaitReady(ctx, sb.ID, 20*time.Millisecond); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
			b.Fatal(err)
		}
		return d
	}
	// Let the pool fill before the first warm claim.
	waitPool := func() {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			list, _ := g.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
				filters.Arg("label", g.ns+".profile=warm"), filters.Arg("status", "running"))})
			if len(list) > 0 {
				time.Sleep(500 * time.Millisecond) // running is not ready: give the readiness probe a moment
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var warm, cold []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitPool()
		b.StartTimer()
		warm = append(warm, measure("warm"))
		cold = append(cold, measure("cold"))
	}
	b.StopTimer()
	w50, c50 := testenv.Percentile(warm, 0.5), testenv.Percentile(cold, 0.5)
	b.ReportMetric(float64(w50.Milliseconds()), "warm-p50-ms")
	b.ReportMetric(float64(c50.Milliseconds()), "cold-p50-ms")
	b.Logf("create-to-ready over %d runs: warm p50 %v, cold p50 %v (cold/warm %.1fx)", b.N, w50, c50, float64(c50)/float64(w50))
}
