package docker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// TestWarmImageClaimOnTheEngine: a warm pool by image on the real engine, with FastGPT's shaped image and this
// checkout's agent injected. The warm member waits without running the image's entrypoint; a create with its own env
// claims it, and the entrypoint then runs with that env (its log line names the create's mark) as the sandbox user
// with HOME, while commands see the env too. After a stop, the start claims the container again: the entrypoint runs
// again with the same env, and so do commands.
func TestWarmImageClaimOnTheEngine(t *testing.T) {
	agentImg, img := anyImages(t)
	p := smallProfile("any", agentImg)
	p.Capabilities = []string{sandboxes.CapShell, sandboxes.CapFilesystem}
	p.AllowedImages = []string{img}
	p.WarmImages = 1
	h := newHarnessImage(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, AgentImage: agentImg}, agentImg)
	ctx := context.Background()
	create := func(mark string) *sandboxes.Sandbox {
		t.Helper()
		sb, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "any", Owner: "tester",
			Image: &sandboxes.ImageRequest{Image: img, Entrypoint: []string{"/home/sandbox/entrypoint.sh"}},
			Env:   map[string]string{"FASTGPT_TEST_MARK": mark}})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		return sb
	}
	cold := create("cold")
	h.ready(cold.ID)
	h.waitFor("a warm member of the image", func() (bool, string) {
		s := h.mgr.WarmImagePools()
		return len(s) == 1 && s[0].Ready == 1, ""
	})

	sb := create("claimed")
	if sb.LaunchType != sandboxes.LaunchWarm || sb.Status != sandboxes.StatusReady {
		t.Fatalf("the second create: %+v", sb)
	}
	if ci := h.inspect(sb.ID); !strings.Contains(strings.Join(ci.Config.Env, " "), agentapi.EnvAwaitClaim+"=1") {
		t.Fatalf("the claimed sandbox's container was not made in the waiting form: %v", ci.Config.Env)
	}
	// check waits for the entrypoint's run-th run with the create's env to have written its files (its last log
	// line comes after them), then reads them through a command.
	check := func(when string, run int) {
		t.Helper()
		agent := h.agent(h.ready(sb.ID))
		h.waitFor(when+": the entrypoint's log with the create's env", func() (bool, string) {
			l := h.containerLog(sb.ID)
			return strings.Count(l, "entrypoint: uid=65532 home=/home/sandbox token=none mark=claimed") >= run &&
				strings.Count(l, "entrypoint: password written") >= run, l
		})
		res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: `echo "$FASTGPT_TEST_MARK ${SANDGATE_AWAIT_CLAIM:-none} $(id -u)"; cat ~/.entrypoint-ran`})
		if err != nil || res.Stdout != "claimed none 65532\nuid=65532 home=/home/sandbox\n" {
			t.Fatalf("%s: exec %+v %v", when, res, err)
		}
	}
	check("after the claim", 1)
	if l := h.containerLog(sb.ID); strings.Count(l, "entrypoint: password written") != 1 {
		t.Fatalf("the entrypoint ran %d times before and at the claim, want once: %s", strings.Count(l, "entrypoint: password written"), l)
	}

	// A stop and a start: the container keeps its waiting form; the start claims it again.
	if err := h.mgr.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	check("after a stop and a start", 2)
	if l := h.containerLog(sb.ID); strings.Count(l, "mark=claimed") != 2 {
		t.Fatalf("the entrypoint's runs with the create's env: %d, want 2: %s", strings.Count(l, "mark=claimed"), l)
	}
}
