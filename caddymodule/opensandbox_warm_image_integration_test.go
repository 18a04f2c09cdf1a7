package caddymodule_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// imagePools reads the admin endpoint's pools by image.
func imagePools(t *testing.T, admin string) []struct {
	Image  string `json:"image"`
	Ready  int    `json:"ready"`
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
} {
	t.Helper()
	var out struct {
		ImagePools []struct {
			Image  string `json:"image"`
			Ready  int    `json:"ready"`
			Hits   uint64 `json:"hits"`
			Misses uint64 `json:"misses"`
		} `json:"image_pools"`
	}
	resp, err := http.Get("http://" + admin + "/sandbox-pools")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.ImagePools
}

// TestOpenSandboxWarmByImage: FastGPT's create sequence, through the real npm SDK, on a profile with warm_images
// (as deploy/fastgpt/provider.Caddyfile sets it): the first create of FastGPT's image is cold and makes the image
// a warm pool; the second claims the warm sandbox, and it behaves as the cold one did. Its container was made
// before the create (in the agent's waiting form), yet the create's environment reached every process: commands see
// FASTGPT_SESSION_ID, the image's entrypoint ran after the claim as the sandbox user with HOME and saw
// IDE_AGENT_ENABLED (it started the image's IDE agent, which answers FastGPT's IDE protocol through fastgpt_proxy),
// and the container runs the image asked with our agent injected and the limits asked.
func TestOpenSandboxWarmByImage(t *testing.T) {
	s := startFastGPTStack(t, "sgosw", fastGPTProfile{name: "fastgpt", extra: []string{"warm_images 2", "env SANDGATE_IDE_AGENT image"}})
	gw, ns, theirs := s.gw, s.ns, s.theirs
	run := func(prefix string) osbFastGPTReport {
		return s.runSDK(t, theirs, "OSB_SESSION_PREFIX="+prefix, "OSB_WAIT_ENTRYPOINT=1")
	}

	cold := run("cold-")
	// The image was asked for: its pool makes one warm sandbox.
	for deadline := time.Now().Add(testenv.WaitLimit); ; {
		p := imagePools(t, gw.AdminAddr)
		if len(p) == 1 && p[0].Ready == 1 {
			if p[0].Image != theirs || p[0].Misses != 1 {
				t.Fatalf("the image's pool: %+v", p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warm sandbox of %s: %+v", theirs, p)
		}
		time.Sleep(100 * time.Millisecond)
	}
	warm := run("warm-")
	if p := imagePools(t, gw.AdminAddr); len(p) != 1 || p[0].Hits != 1 {
		t.Fatalf("the second create did not claim the warm sandbox: %+v", p)
	}

	for i, rep := range []osbFastGPTReport{cold, warm} {
		im := rep.Images[0]
		kind := []string{"cold", "warm"}[i]
		lines := strings.Split(im.Run.Stdout, "\n")
		if im.Run.ExitCode != 0 || len(lines) < 5 || lines[0] != "65532" || lines[1] != "/home/sandbox" ||
			lines[2] != kind+"-0" || len(lines[3]) < 20 || lines[4] != "uid=65532 home=/home/sandbox" {
			t.Errorf("%s: commands.run %+v", kind, im.Run)
		}
		if im.FailExit != 3 || im.FailStderr != "oops" || im.TmpPwd != "/tmp" {
			t.Errorf("%s: failing command exit %d stderr %q; pwd in /tmp %q", kind, im.FailExit, im.FailStderr, im.TmpPwd)
		}
		info := testenv.Inspect(t, testenv.ContainerOf(t, ns, im.ID))
		if info.Config.Image != theirs || !strings.HasPrefix(info.Path, "/opt/sandgate/") ||
			info.HostConfig.NanoCPUs != 5e8 || info.HostConfig.Memory != 512<<20 {
			t.Errorf("%s: container runs %q with %q, cpus %d memory %d", kind, info.Config.Image, info.Path,
				info.HostConfig.NanoCPUs, info.HostConfig.Memory)
		}
		// The warm one's container was made before its create: in the waiting form, without the create's env.
		waiting := slices.Contains(info.Config.Env, agentapi.EnvAwaitClaim+"=1")
		hasSession := slices.ContainsFunc(info.Config.Env, func(e string) bool { return strings.HasPrefix(e, "FASTGPT_SESSION_ID=") })
		if waiting != (kind == "warm") || hasSession == (kind == "warm") {
			t.Errorf("%s: container env waiting=%v session=%v", kind, waiting, hasSession)
		}
		// The image's entrypoint saw IDE_AGENT_ENABLED (the create's env) and started the image's IDE agent.
		if len(lines) < 4 {
			continue
		}
		got := s.ide(t, im.Endpoint1318, lines[3], fmt.Sprintf("ide/%s.txt", kind))
		if want := "hello ide\n/usr/local/bin/fastgpt-ide-agent "; got != want {
			t.Errorf("%s: fs/exec through the relay: %q, want %q", kind, got, want)
		}
	}
}
