package bench

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testenv"
)

// BenchmarkOpenSandboxFirstCommand: create-to-first-command through OpenSandbox's npm SDK against the gateway
// (Sandbox.create with the SDK's own readiness check, then commands.run('true') through the proxy to the agent's
// execd API), cold and from the warm pool, against `docker run --rm --entrypoint true` of the same image, measured in
// the same run; and cold for an image of another kind (FastGPT-shaped, debian-slim, built in the run) with our
// agent injected, under a profile whose allowed_images admits it. Run by hand:
//
//	go test -run x -bench OpenSandboxFirstCommand -benchtime 1x ./bench
func BenchmarkOpenSandboxFirstCommand(b *testing.B) {
	mods := testenv.NodeModules(b)
	image := testenv.Image(b, "base")
	fastgpt := testenv.FastGPTImage(b)
	ns := testenv.Unique("sgbosb")
	testenv.RemoveNamespace(b, ns)
	bayPort, osbPort := testenv.FreePort(b), testenv.FreePort(b)
	const key = "bench-osb-key-0123456789"
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %s
		warm_refill_rate 20
		profile cold {
			image %s
			cpus 0.5
			memory 256m
			pids 128
			capabilities shell python filesystem
		}
		profile warm {
			image %s
			cpus 0.5
			memory 256m
			pids 128
			capabilities shell python filesystem
			warm_pool 2
		}
		profile anyimage {
			image %s
			cpus 0.5
			memory 256m
			pids 128
			capabilities shell python filesystem
			allowed_images %s
		}
	}
}

http://127.0.0.1:%d {
	sandbox_api {
		key %s bench
	}
}

http://127.0.0.1:%d {
	sandbox_opensandbox
}
`, ns, image, image, image, fastgpt, bayPort, key, osbPort)
	testenv.StartGateway(b, caddyfile, testenv.GatewayOptions{})
	if err := testenv.WaitHTTP(b.Context(), fmt.Sprintf("http://127.0.0.1:%d/health", osbPort), testenv.WaitLimit); err != nil {
		b.Fatal(err)
	}
	const samples = 5
	run := func(profile, image string, pause time.Duration) []time.Duration {
		out, err := testenv.RunNode(b, filepath.Join("testdata", "opensandbox_first_command.cjs"),
			fmt.Sprintf("OSB_DOMAIN=http://127.0.0.1:%d", osbPort), "OSB_KEY="+key, "OSB_IMAGE="+image, "PROFILE="+profile,
			fmt.Sprintf("SAMPLES=%d", samples), fmt.Sprintf("PAUSE_MS=%d", pause.Milliseconds()), "NODE_PATH="+mods)
		if err != nil {
			b.Fatalf("%s: %v\n%s", profile, err, out)
		}
		var msList []float64
		if err := json.Unmarshal([]byte(lastLine(out)), &msList); err != nil {
			b.Fatalf("%s: %v\n%s", profile, err, out)
		}
		ds := make([]time.Duration, len(msList))
		for i, v := range msList {
			ds[i] = time.Duration(v * float64(time.Millisecond))
		}
		return ds
	}
	dockerRun := func(image string) time.Duration {
		var ds []time.Duration
		for range samples {
			start := time.Now()
			if out, err := exec.Command("docker", "run", "--rm", "--entrypoint", "true", image).CombinedOutput(); err != nil {
				b.Fatalf("docker run: %v %s", err, out)
			}
			ds = append(ds, time.Since(start))
		}
		return testenv.Percentile(ds, .5)
	}
	base, baseAny := dockerRun(image), dockerRun(fastgpt)
	cold := run("cold", image, 0)
	warm := run("warm", image, 2*time.Second)
	anyImage := run("anyimage", fastgpt, 0)
	for _, r := range []struct {
		name string
		d    []time.Duration
		base time.Duration
	}{{"cold", cold, base}, {"warm", warm, base}, {"anyimage-cold", anyImage, baseAny}} {
		p50, base := testenv.Percentile(r.d, .5), r.base
		b.ReportMetric(ms(p50), r.name+"-p50-ms")
		b.ReportMetric(float64(p50)/float64(base), r.name+"-x-docker-run")
		b.Logf("SDK create to first command, %s: p50 %.0f ms (%.2fx `docker run --rm --entrypoint true`, p50 %.0f ms)", r.name, ms(p50), float64(p50)/float64(base), ms(base))
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
