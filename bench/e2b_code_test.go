package bench

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// BenchmarkE2BCodeFirstResult: create-to-first-result through E2B's npm code-interpreter SDK against the gateway's
// E2B dialect over HTTPS (Sandbox.create, then runCode('1 + 1') through the edge at 49999-{id} to the agent's code
// interpreter, whose Python context starts its kernel on this first execution), cold and from the warm pool,
// against `docker run --rm` of the same image (`true`, and `python3 -c 'print(1 + 1)'`), each sample right after
// its baselines so all see the same load. Run by hand:
//
//	go test -run x -bench E2BCodeFirstResult -benchtime 1x ./bench
func BenchmarkE2BCodeFirstResult(b *testing.B) {
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
		"E2B_API_KEY=" + key, "NODE_EXTRA_CA_CERTS=" + ca, "IMAGE=" + image, "NODE_PATH=" + mods,
	}
	const samples = 5
	run := func(template string, pause time.Duration) (sdk, base, basePy []time.Duration) {
		out, err := testenv.RunNode(b, filepath.Join("testdata", "e2b_code_first_result.cjs"), append(env, "TEMPLATE="+template,
			fmt.Sprintf("SAMPLES=%d", samples), fmt.Sprintf("PAUSE_MS=%d", pause.Milliseconds()))...)
		if err != nil {
			b.Fatalf("%s: %v\n%s", template, err, out)
		}
		var got struct{ SDK, Base, BasePy []float64 }
		if err := json.Unmarshal([]byte(lastLine(out)), &got); err != nil || len(got.SDK) != samples || len(got.Base) != samples {
			b.Fatalf("%s: %v\n%s", template, err, out)
		}
		durations := func(msList []float64) []time.Duration {
			ds := make([]time.Duration, len(msList))
			for i, v := range msList {
				ds[i] = time.Duration(v * float64(time.Millisecond))
			}
			return ds
		}
		return durations(got.SDK), durations(got.Base), durations(got.BasePy)
	}
	b.Logf("load average at start: %s", loadAverage())
	for _, k := range []struct {
		template string
		pause    time.Duration
	}{{"cold", 0}, {"warm", 2 * time.Second}} {
		sdk, base, basePy := run(k.template, k.pause)
		p50, b50, py50 := testenv.Percentile(sdk, .5), testenv.Percentile(base, .5), testenv.Percentile(basePy, .5)
		b.ReportMetric(ms(p50), k.template+"-p50-ms")
		b.ReportMetric(float64(p50)/float64(py50), k.template+"-x-docker-run-python")
		b.Logf("SDK create to first code result, %s: p50 %.0f ms (%.2fx `docker run --rm` python3 -c of the same image, p50 %.0f ms; `docker run --rm --entrypoint true` p50 %.0f ms)",
			k.template, ms(p50), float64(p50)/float64(py50), ms(py50), ms(b50))
	}
	b.Logf("load average at end: %s", loadAverage())
}
