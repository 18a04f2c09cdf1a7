package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// claimSteps are the medians of one runtime's warm claims, step by step.
type claimSteps struct {
	create, ensure, firstExec, total, pooledExec, dialedExec, engineExec, spawn time.Duration
}

// spawnTrue is run by python3 in the sandbox: the median of 20 posix_spawn()s (vfork and exec, as Go's os/exec
// does) of /usr/bin/true, each waited for, in microseconds: the runtime's own cost of a process, without the agent
// or the network.
const spawnTrue = `import os, time
xs = []
for _ in range(21):
    t = time.perf_counter()
    os.waitpid(os.posix_spawn("/usr/bin/true", ["true"], {}), 0)
    xs.append(time.perf_counter() - t)
print(int(sorted(xs)[10] * 1e6))`

// BenchmarkRuntimesClaimSteps: where warm claim to first exec spends its time, on runc and on runsc. Each claim is
// split into Manager.Create (the claim: the record's store write), EnsureRunning (the target) and the first `true`
// through the agent on the Manager's connection pool (as the gateway's API sends a client's first command: the warm
// member's probe left a connection open); then, on the same sandbox, `true` again on that connection (the agent's and
// the runtime's exec cost alone), `true` on a new connection (plus a TCP handshake with the sandbox's network stack)
// and a `docker exec true` (the engine's exec path, the baseline). Last, python3 in the sandbox times spawning
// /usr/bin/true itself (spawnTrue): what a process costs under the runtime, below the agent.
func BenchmarkRuntimesClaimSteps(b *testing.B) {
	testenv.Runsc(b)
	var t strings.Builder
	t.WriteString("\n| median of 10 warm claims | runc | runsc | runsc/runc |\n|---|---|---|---|\n")
	runc, runsc := claimStepsOf(b, ""), claimStepsOf(b, sandboxes.RuntimeGVisor)
	row := func(name string, a, b time.Duration) {
		fmt.Fprintf(&t, "| %s | %.2f ms | %.2f ms | %.2fx |\n", name, ms(a), ms(b), float64(b)/float64(a))
	}
	row("Create (claim)", runc.create, runsc.create)
	row("EnsureRunning", runc.ensure, runsc.ensure)
	row("first exec `true` (pooled connection)", runc.firstExec, runsc.firstExec)
	row("claim to first exec", runc.total, runsc.total)
	row("exec `true` again, open connection", runc.pooledExec, runsc.pooledExec)
	row("exec `true`, new connection", runc.dialedExec, runsc.dialedExec)
	row("`docker exec true`", runc.engineExec, runsc.engineExec)
	row("spawn `/usr/bin/true` inside the sandbox (no agent, no network)", runc.spawn, runsc.spawn)
	b.Log(t.String())
	b.ReportMetric(ms(runsc.total), "runsc-claim-exec-p50-ms")
	b.ReportMetric(ms(runsc.pooledExec), "runsc-exec-p50-ms")
}

func claimStepsOf(b *testing.B, runtime string) claimSteps {
	p := benchProfile("warm")
	p.WarmPoolSize, p.Runtime = 1, runtime
	lb := newLifecycleBench(b, p, 2)
	ctx := context.Background()
	var create, ensure, first, total, pooled, dialed, engine []time.Duration
	var spawn time.Duration
	for range 10 {
		deadline := time.Now().Add(2 * time.Minute)
		for lb.mgr.WarmReady() == 0 {
			if time.Now().After(deadline) {
				b.Fatal("warm pool never refilled")
			}
			time.Sleep(10 * time.Millisecond)
		}
		t0 := time.Now()
		sb, err := lb.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "warm"})
		if err != nil {
			b.Fatal(err)
		}
		if sb.LaunchType != sandboxes.LaunchWarm {
			b.Fatalf("not a warm claim: %+v", sb)
		}
		t1 := time.Now()
		tg := lb.ready(sb.ID)
		t2 := time.Now()
		execTrue := func(hc *http.Client) {
			res, err := agentapi.NewClientFor(tg.Addr, tg.Token, hc).Exec(ctx, agentapi.ExecRequest{Argv: []string{"true"}})
			if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				b.Fatalf("exec: %v %+v", err, res)
			}
		}
		execTrue(lb.mgr.AgentHTTPClient())
		t3 := time.Now()
		create, ensure, first, total = append(create, t1.Sub(t0)), append(ensure, t2.Sub(t1)), append(first, t3.Sub(t2)), append(total, t3.Sub(t0))
		t4 := time.Now()
		execTrue(lb.mgr.AgentHTTPClient())
		pooled = append(pooled, time.Since(t4))
		hc := &http.Client{Transport: &http.Transport{}}
		t5 := time.Now()
		execTrue(hc)
		dialed = append(dialed, time.Since(t5))
		hc.CloseIdleConnections()
		t6 := time.Now()
		lb.engineExec(sb.ID)
		engine = append(engine, time.Since(t6))
		if spawn == 0 {
			res, err := agentapi.NewClientFor(tg.Addr, tg.Token, lb.mgr.AgentHTTPClient()).Exec(ctx, agentapi.ExecRequest{Argv: []string{"python3", "-c", spawnTrue}})
			if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				b.Fatalf("timing a spawn in the sandbox: %v %+v", err, res)
			}
			us, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
			if err != nil {
				b.Fatalf("timing a spawn in the sandbox: %q: %v", res.Stdout, err)
			}
			spawn = time.Duration(us) * time.Microsecond
		}
		_ = lb.mgr.Delete(ctx, sb.ID)
	}
	p50 := func(d []time.Duration) time.Duration { return testenv.Percentile(d, .5) }
	return claimSteps{create: p50(create), ensure: p50(ensure), firstExec: p50(first), total: p50(total), pooledExec: p50(pooled), dialedExec: p50(dialed), engineExec: p50(engine), spawn: spawn}
}
