package bench

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// BenchmarkE2BFirstCommand: create-to-first-command through E2B's npm `e2b` SDK against the gateway's E2B dialect
// over HTTPS (Sandbox.create, then commands.run('true') through the edge at 49983-{id} to the agent's envd), cold
// and from the warm pool, against `docker run --rm --entrypoint true` of the same image, each sample right after its
// baseline so both see the same load. Run by hand:
//
//	go test -run x -bench E2BFirstCommand -benchtime 1x ./bench
func BenchmarkE2BFirstCommand(b *testing.B) {
	b.Logf("load average at start: %s", loadAverage())
	for _, r := range runE2BFirst(b, "command") {
		p50, b50 := testenv.Percentile(r.sdk, .5), testenv.Percentile(r.base, .5)
		b.ReportMetric(ms(p50), r.template+"-p50-ms")
		b.ReportMetric(float64(p50)/float64(b50), r.template+"-x-docker-run")
		b.Logf("SDK create to first command, %s: p50 %.0f ms (%.2fx `docker run --rm --entrypoint true` of the same image, p50 %.0f ms)",
			r.template, ms(p50), float64(p50)/float64(b50), ms(b50))
	}
	b.Logf("load average at end: %s", loadAverage())
}

// BenchmarkE2BCodeFirstResult: create-to-first-result through E2B's npm code-interpreter SDK against the gateway's
// E2B dialect over HTTPS (Sandbox.create, then runCode('1 + 1') through the edge at 49999-{id} to the agent's code
// interpreter, whose Python context starts its kernel on this first execution), cold and from the warm pool,
// against `docker run --rm` of the same image (`true`, and `python3 -c 'print(1 + 1)'`), each sample right after
// its baselines so all see the same load. Run by hand:
//
//	go test -run x -bench E2BCodeFirstResult -benchtime 1x ./bench
func BenchmarkE2BCodeFirstResult(b *testing.B) {
	b.Logf("load average at start: %s", loadAverage())
	for _, r := range runE2BFirst(b, "code") {
		p50, b50, py50 := testenv.Percentile(r.sdk, .5), testenv.Percentile(r.base, .5), testenv.Percentile(r.basePy, .5)
		b.ReportMetric(ms(p50), r.template+"-p50-ms")
		b.ReportMetric(float64(p50)/float64(py50), r.template+"-x-docker-run-python")
		b.Logf("SDK create to first code result, %s: p50 %.0f ms (%.2fx `docker run --rm` python3 -c of the same image, p50 %.0f ms; `docker run --rm --entrypoint true` p50 %.0f ms)",
			r.template, ms(p50), float64(p50)/float64(py50), ms(py50), ms(b50))
	}
	b.Logf("load average at end: %s", loadAverage())
}

// e2bFirstRun is one template's samples from testdata/e2b_first.cjs: the SDK's times and the `docker run` baselines
// taken between them (basePy only in code mode).
type e2bFirstRun struct {
	template          string
	sdk, base, basePy []time.Duration
}

// runE2BFirst starts a gateway on the base image with E2B templates `cold` (no pool) and `warm` (a pool of 2) and
// runs testdata/e2b_first.cjs in mode ("command" or "code") against each, cold first.
func runE2BFirst(b *testing.B, mode string) []e2bFirstRun {
	b.Helper()
	mods := testenv.NodeModules(b)
	image := testenv.Image(b, "base")
	ns := testenv.Unique("sgbe2b")
	testenv.RemoveNamespace(b, ns)
	httpsPort := testenv.FreePort(b)
	const key = "bench-e2b-key-0123456789"
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	skip_install_trust
	sandboxes {
		namespace %s
		warm_refill_rate 20
		profile cold {
			image %s
			cpus 1
			memory 512m
			pids 256
			capabilities shell python filesystem
		}
		profile warm {
			image %s
			cpus 1
			memory 512m
			pids 256
			capabilities shell python filesystem
			warm_pool 2
		}
	}
}

localhost {
	tls internal
	sandbox_api {
		key %s bench
	}
	sandbox_e2b {
		prefix /e2b
		domain sandbox.localhost:%d
		template cold cold
		template warm warm
	}
}

*.sandbox.localhost, sandbox.localhost {
	tls internal
	sandbox_e2b_edge {
		domain sandbox.localhost
	}
}
`, testenv.FreePort(b), httpsPort, ns, image, image, key, httpsPort)
	g := testenv.StartGateway(b, caddyfile, testenv.GatewayOptions{})
	ca, err := g.WaitRootCA(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	https := g.HTTPSClient(b, b.Context(), 5*time.Second)
	testenv.WaitHandshake(b, b.Context(), https, fmt.Sprintf("https://localhost:%d/e2b/health", httpsPort))
	env := []string{
		fmt.Sprintf("E2B_API_URL=https://localhost:%d/e2b", httpsPort),
		fmt.Sprintf("E2B_DOMAIN=sandbox.localhost:%d", httpsPort),
		"E2B_API_KEY=" + key, "NODE_EXTRA_CA_CERTS=" + ca, "IMAGE=" + image, "NODE_PATH=" + mods, "MODE=" + mode,
	}
	const samples = 5
	durations := func(msList []float64) []time.Duration {
		ds := make([]time.Duration, len(msList))
		for i, v := range msList {
			ds[i] = time.Duration(v * float64(time.Millisecond))
		}
		return ds
	}
	var runs []e2bFirstRun
	for _, k := range []struct {
		template string
		pause    time.Duration
	}{{"cold", 0}, {"warm", 2 * time.Second}} {
		out, err := testenv.RunNode(b, filepath.Join("testdata", "e2b_first.cjs"), append(env, "TEMPLATE="+k.template,
			fmt.Sprintf("SAMPLES=%d", samples), fmt.Sprintf("PAUSE_MS=%d", k.pause.Milliseconds()))...)
		if err != nil {
			b.Fatalf("%s %s: %v\n%s", mode, k.template, err, out)
		}
		var got struct{ SDK, Base, BasePy []float64 }
		if err := json.Unmarshal([]byte(lastLine(out)), &got); err != nil || len(got.SDK) != samples || len(got.Base) != samples ||
			(mode == "code" && len(got.BasePy) != samples) {
			b.Fatalf("%s %s: %v\n%s", mode, k.template, err, out)
		}
		runs = append(runs, e2bFirstRun{k.template, durations(got.SDK), durations(got.Base), durations(got.BasePy)})
	}
	return runs
}
