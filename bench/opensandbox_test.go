package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// BenchmarkOpenSandboxFirstCommand: create-to-first-command through OpenSandbox's npm SDK against the gateway
// (Sandbox.create with the SDK's own readiness check, then commands.run('true') through the proxy to the agent's
// execd API), cold and from the warm pool, against `docker run --rm --entrypoint true` of the same image, each
// sample taken right after a baseline sample so both see the same load (after one untimed sample: the SDK's first
// call in a process costs about a second under load, its own start-up, not the gateway's); and cold for an image of another kind
// (testenv.FastGPTImage: FastGPT-shaped, debian-slim, built in the run) with our agent injected, FastGPT's
// entrypoint and a session's env, under a profile whose allowed_images admits it: cold, and warm from the pool by
// image (warm_images; the untimed first sample makes the image's pool, and every timed sample must be a pool hit,
// read from the admin endpoint, or the run fails). Run by hand:
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
		agent_image %s
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
		profile anyimage-warm {
			image %s
			cpus 0.5
			memory 256m
			pids 128
			capabilities shell python filesystem
			allowed_images %s
			warm_images 1
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
`, ns, image, image, image, image, fastgpt, image, fastgpt, bayPort, key, osbPort)
	gw := testenv.StartGateway(b, caddyfile, testenv.GatewayOptions{})
	if err := testenv.WaitHTTP(b.Context(), fmt.Sprintf("http://127.0.0.1:%d/health", osbPort), testenv.WaitLimit); err != nil {
		b.Fatal(err)
	}
	const samples = 5
	// Each kind's samples through the SDK, with a `docker run` of the same image right before each (the script).
	run := func(profile, image, entrypoint, env string, pause time.Duration) (sdk, base []time.Duration) {
		out, err := testenv.RunNode(b, filepath.Join("testdata", "opensandbox_first_command.cjs"), "ENTRYPOINT="+entrypoint, "CREATE_ENV="+env,
			fmt.Sprintf("OSB_DOMAIN=http://127.0.0.1:%d", osbPort), "OSB_KEY="+key, "OSB_IMAGE="+image, "PROFILE="+profile,
			fmt.Sprintf("SAMPLES=%d", samples), fmt.Sprintf("PAUSE_MS=%d", pause.Milliseconds()), "NODE_PATH="+mods)
		if err != nil {
			b.Fatalf("%s: %v\n%s", profile, err, out)
		}
		var got struct{ SDK, Base []float64 }
		if err := json.Unmarshal([]byte(lastLine(out)), &got); err != nil || len(got.SDK) != samples || len(got.Base) != samples {
			b.Fatalf("%s: %v\n%s", profile, err, out)
		}
		durations := func(msList []float64) []time.Duration {
			ds := make([]time.Duration, len(msList))
			for i, v := range msList {
				ds[i] = time.Duration(v * float64(time.Millisecond))
			}
			return ds
		}
		return durations(got.SDK), durations(got.Base)
	}
	const keepAlive, fastgptEntry, session = `["tail","-f","/dev/null"]`, `["/home/sandbox/entrypoint.sh"]`, `{"FASTGPT_SESSION_ID":"bench"}`
	kinds := []struct {
		name, profile, image, entrypoint, env string
		pause                                 time.Duration
		sdk, base                             []time.Duration
	}{
		{name: "cold", profile: "cold", image: image, entrypoint: keepAlive, env: "{}"},
		{name: "warm", profile: "warm", image: image, entrypoint: keepAlive, env: "{}", pause: 2 * time.Second},
		{name: "anyimage-cold", profile: "anyimage", image: fastgpt, entrypoint: fastgptEntry, env: session},
		{name: "anyimage-warm", profile: "anyimage-warm", image: fastgpt, entrypoint: fastgptEntry, env: session, pause: 2 * time.Second},
	}
	b.Logf("load average at start: %s", loadAverage())
	for i := range kinds {
		k := &kinds[i]
		k.sdk, k.base = run(k.profile, k.image, k.entrypoint, k.env, k.pause)
	}
	b.Logf("load average at end: %s", loadAverage())
	// Every timed anyimage-warm sample claimed a warm sandbox of the image (the untimed first one made the pool).
	if hits := imagePoolHits(b, gw.AdminAddr, fastgpt); hits < samples {
		b.Fatalf("anyimage-warm: %d of %d samples claimed a warm sandbox by image", hits, samples)
	}
	for _, k := range kinds {
		p50, base := testenv.Percentile(k.sdk, .5), testenv.Percentile(k.base, .5)
		b.ReportMetric(ms(p50), k.name+"-p50-ms")
		b.ReportMetric(float64(p50)/float64(base), k.name+"-x-docker-run")
		b.Logf("SDK create to first command, %s: p50 %.0f ms (%.2fx `docker run --rm --entrypoint true` of the same image, p50 %.0f ms)",
			k.name, ms(p50), float64(p50)/float64(base), ms(base))
	}
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures, logged beside timings taken on a shared machine.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// imagePoolHits is the hits of image's pool by image (admin GET /sandbox-pools).
func imagePoolHits(b *testing.B, admin, image string) uint64 {
	resp, err := http.Get("http://" + admin + "/sandbox-pools")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ImagePools []struct {
			Image         string `json:"image"`
			Hits          uint64 `json:"hits"`
			ClaimFailures uint64 `json:"claim_failures"`
		} `json:"image_pools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		b.Fatal(err)
	}
	var hits uint64
	for _, p := range out.ImagePools {
		if p.Image == image {
			hits += p.Hits
			if p.ClaimFailures > 0 {
				b.Errorf("%s: %d warm claims by image failed", image, p.ClaimFailures)
			}
		}
	}
	return hits
}
