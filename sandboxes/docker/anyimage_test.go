package docker_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

var agentOnlyImage = sync.OnceValues(func() (string, error) {
	tag := strings.TrimSuffix(testenv.Getenv("SANDGATE_IMAGE_REPO", "sandgate/sandbox"), "/sandbox") + "/anyimage-agent:test"
	return tag, buildAgentOnlyImage(tag)
})

// anyImages returns two images built from debian:bookworm-slim (present locally; nothing is pulled): a minimal
// agent image (this checkout's static agent where our images keep it, the source the driver copies the agent
// from) and the FastGPT-shaped image every test uses (testenv.FastGPTImage). Neither waits for our full sandbox
// images.
func anyImages(t *testing.T) (agent, fastgpt string) {
	t.Helper()
	testenv.Integration(t)
	agent, err := agentOnlyImage()
	if err != nil {
		t.Fatal(err)
	}
	return agent, testenv.FastGPTImage(t)
}

func buildAgentOnlyImage(tag string) error {
	dir, err := os.MkdirTemp("", "anyimage-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "sandgate-agent"), "./agentimage")
	build.Dir = testenv.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the agent: %v: %s", err, out)
	}
	dockerfile := "FROM debian:bookworm-slim\nCOPY sandgate-agent /usr/local/bin/sandgate-agent\nENTRYPOINT [\"/usr/local/bin/sandgate-agent\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("docker", "build", "-q", "-t", tag, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker build %s: %v: %s", tag, err, out)
	}
	return nil
}

// containerLog is the container's stdout and stderr as the engine keeps them.
func (h *harness) containerLog(id string) string {
	h.t.Helper()
	rc, err := h.cli.ContainerLogs(context.Background(), h.containerName(id), container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		h.t.Fatalf("container logs: %v", err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

func (h *harness) waitFor(what string, cond func() (bool, string)) {
	h.t.Helper()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within %s; last: %s", what, testenv.WaitLimit, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAnyImageFastGPTEntrypoint runs an image that is not ours, shaped like FastGPT's, with our agent injected:
// the sandbox becomes ready, exec and files work through our agent, what the image's entrypoint wrote is visible,
// the entrypoint stays alive as the agent's child with the sandbox's env and its output in the container log, and
// the container is hardened as every sandbox is. A writable root is the profile's explicit relaxation. Under runc
// and under gVisor: the injected agent and a foreign image's own entrypoint under it, in gVisor's kernel.
func TestAnyImageFastGPTEntrypoint(t *testing.T) {
	eachRuntime(t, anyImageFastGPTEntrypoint)
}

func anyImageFastGPTEntrypoint(t *testing.T, runtime string) {
	agentImg, img := anyImages(t)
	strict := smallProfile("fastgpt", img)
	strict.Runtime = runtime
	strict.Capabilities = []string{sandboxes.CapShell, sandboxes.CapFilesystem}
	strict.InjectAgent = true
	strict.Env = map[string]string{"FASTGPT_TEST_MARK": "yes"}
	relaxed := strict
	relaxed.ID = "fastgpt-writable"
	relaxed.WritableRoot = true
	h := newHarnessImage(t, sandboxes.Config{Profiles: []sandboxes.Profile{strict, relaxed}, AgentImage: agentImg}, img)
	ctx := context.Background()

	sb := h.create("fastgpt")
	tg := h.ready(sb.ID)
	agent := h.agent(tg)

	// The entrypoint ran (after the agent began serving): what it wrote in the workspace is visible through our
	// files API (which serves the workspace), and the password it wrote into HOME through our exec, which is how
	// FastGPT reads it (`cat ~/.fastgpt-ide-agent-password`).
	h.waitFor("the entrypoint's marker through the files API", func() (bool, string) {
		r, err := agent.FSRead(ctx, agentapi.ReadRequest{Path: ".entrypoint-ran"})
		if err != nil {
			return false, err.Error()
		}
		return r.Content == "65532\n", r.Content
	})
	var content string
	h.waitFor("the entrypoint's password file", func() (bool, string) {
		res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: "cat ~/.fastgpt-ide-agent-password"})
		if err != nil {
			return false, err.Error()
		}
		content = strings.TrimSpace(res.Stdout)
		return len(content) >= 20, res.Stdout + res.Stderr
	})
	res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: "cat ~/.fastgpt-ide-agent-password; echo; id -u; echo $HOME; pwd"})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if want := content + "\n65532\n/home/sandbox\n/workspace\n"; res.Stdout != want {
		t.Fatalf("exec stdout %q, want %q", res.Stdout, want)
	}
	// The image's own files in HOME are there (the entrypoint itself), and the workspace is the sandbox user's.
	if res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: "test -x ~/entrypoint.sh && echo ok > /workspace/w && cat /workspace/w"}); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("image HOME or workspace: %+v %v", res, err)
	}

	// The entrypoint is alive, supervised by the agent: /v1/info names it, and its pid is the `sleep` it exec'd.
	info, err := agent.Info(ctx)
	if err != nil || info.Entrypoint == nil || !info.Entrypoint.Running || info.Entrypoint.PID == 0 ||
		!slices.Equal(info.Entrypoint.Argv, []string{"/home/sandbox/entrypoint.sh"}) {
		t.Fatalf("info: %+v %v", info.Entrypoint, err)
	}
	res, err = agent.Exec(ctx, agentapi.ExecRequest{Cmd: fmt.Sprintf("tr '\\0' ' ' < /proc/%d/cmdline", info.Entrypoint.PID)})
	if err != nil || strings.TrimSpace(res.Stdout) != "sleep infinity" {
		t.Fatalf("entrypoint process: %+v %v", res, err)
	}
	// Its output is in the container log; it got the profile's env and not the agent's token.
	h.waitFor("the entrypoint's log lines", func() (bool, string) {
		l := h.containerLog(sb.ID)
		return strings.Contains(l, "entrypoint: password written"), l
	})
	logs := h.containerLog(sb.ID)
	if !strings.Contains(logs, "entrypoint: uid=65532 home=/home/sandbox token=none mark=yes") {
		t.Fatalf("entrypoint's view: %s", logs)
	}

	// Hardened as our defaults say, with the agent mounted read-only and run as the container's command.
	ci := h.inspect(sb.ID)
	hc := ci.HostConfig
	if ci.Config.User != docker.SandboxUser || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !hc.ReadonlyRootfs || hc.Privileged ||
		hc.Init == nil || !*hc.Init || !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || hc.MemorySwap != hc.Memory {
		t.Fatalf("hardening: user=%q %+v", ci.Config.User, hc)
	}
	if hc.Runtime != runtime && (runtime != "" || hc.Runtime != "runc") {
		t.Fatalf("the sandbox runs under runtime %q, want %q", hc.Runtime, runtime)
	}
	if want := []string{"/opt/sandgate/sandgate-agent", "supervise", "--", "/home/sandbox/entrypoint.sh"}; !slices.Equal(ci.Config.Entrypoint, want) || len(ci.Config.Cmd) != 0 {
		t.Fatalf("entrypoint %q cmd %q, want %q", ci.Config.Entrypoint, ci.Config.Cmd, want)
	}
	agentMounted := false
	for _, m := range ci.Mounts {
		if m.Destination == sandboxes.AgentMountPoint {
			agentMounted = !m.RW && strings.HasPrefix(m.Name, h.ns+"-agent-")
		}
	}
	if !agentMounted {
		t.Fatalf("agent volume not mounted read-only: %+v", ci.Mounts)
	}
	for _, cmd := range []string{"touch /etc/x", "touch /etc/anyimage/x", "touch /opt/sandgate/x", "cp /bin/true /opt/sandgate/sandgate-agent"} {
		if res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: cmd}); err != nil || res.ExitCode == nil || *res.ExitCode == 0 {
			t.Errorf("%q succeeded in a hardened sandbox: %+v %v", cmd, res, err)
		}
	}

	// writable_root relaxes only the root filesystem: the image's own world-writable /etc directory takes writes,
	// root's files still do not (the user is still 65532).
	rb := h.create("fastgpt-writable")
	rtg := h.ready(rb.ID)
	if res, err := h.agent(rtg).Exec(ctx, agentapi.ExecRequest{Cmd: "touch /etc/anyimage/x && echo ok; touch /etc/x || echo denied; id -u"}); err != nil ||
		res.Stdout != "ok\ndenied\n65532\n" || !strings.Contains(res.Stderr, "Permission denied") {
		t.Fatalf("writable root: %+v %v", res, err)
	}
	rhc := h.inspect(rb.ID).HostConfig
	if rhc.ReadonlyRootfs || !slices.Equal(rhc.CapDrop, []string{"ALL"}) || !slices.Contains(rhc.SecurityOpt, "no-new-privileges:true") {
		t.Fatalf("writable_root relaxed more than the root filesystem: %+v", rhc)
	}
}

// TestAnyImageHomeIsSized is the finding of issue 33: an injected sandbox's HOME was an engine volume with no size,
// so a tenant could fill the engine's disk through it. HOME is now the profile's sized tmpfs (disk 64m here), as
// in our images: a write past it ends in ENOSPC. What the image keeps in HOME is still there (the entrypoint ran
// from it), copied from the read-only seed, which the tenant cannot write either.
func TestAnyImageHomeIsSized(t *testing.T) {
	agentImg, img := anyImages(t)
	p := smallProfile("fastgpt", img)
	p.Capabilities = []string{sandboxes.CapShell, sandboxes.CapFilesystem}
	p.InjectAgent = true
	h := newHarnessImage(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, AgentImage: agentImg}, img)
	ctx := context.Background()
	sb := h.create("fastgpt")
	agent := h.agent(h.ready(sb.ID))
	res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: "test -x ~/entrypoint.sh && echo seeded; " +
		"dd if=/dev/zero of=$HOME/fill bs=1M count=100 2>&1; echo rc=$?; df -k $HOME | tail -1; " +
		"touch /opt/sandgate-home/x 2>/dev/null || echo seed-ro"})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Stdout + res.Stderr
	if !strings.Contains(out, "seeded\n") || !strings.Contains(out, "No space left on device") || !strings.Contains(out, "rc=1") ||
		!strings.Contains(out, "seed-ro") {
		t.Fatalf("HOME in an injected sandbox: %s", out)
	}
	if f := strings.Fields(out[strings.LastIndex(out, "tmpfs"):]); len(f) < 2 || f[1] != "65536" {
		t.Errorf("HOME is not the profile's 64m tmpfs: %s", out)
	}
	// The seed volume goes with its container.
	seed := ""
	for _, m := range h.inspect(sb.ID).Mounts {
		if m.Destination == agentapi.HomeSeedDir {
			seed = m.Name
		}
	}
	if seed == "" {
		t.Fatal("no HOME seed volume")
	}
	if err := h.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cli.VolumeInspect(ctx, seed); err == nil {
		t.Errorf("the HOME seed volume %s outlived its sandbox", seed)
	}
}

// TestAnyImageHomeSeedOrphanSwept: a gateway that died between making a sandbox's HOME seed volume and making its
// container left the volume behind, and the orphan sweep did not look for it. Now it removes a seed volume whose
// sandbox has no entry and no container, and keeps the one a live injected sandbox mounts.
func TestAnyImageHomeSeedOrphanSwept(t *testing.T) {
	agentImg, img := anyImages(t)
	p := smallProfile("fastgpt", img)
	p.Capabilities = []string{sandboxes.CapShell}
	p.InjectAgent = true
	h := newHarnessImage(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, AgentImage: agentImg,
		GCInterval: time.Hour, OrphanMinAge: time.Millisecond}, img)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := h.create("fastgpt")
	h.ready(sb.ID)
	live := ""
	for _, m := range h.inspect(sb.ID).Mounts {
		if m.Destination == agentapi.HomeSeedDir {
			live = m.Name
		}
	}
	if live == "" {
		t.Fatal("no HOME seed volume")
	}
	lv, err := h.cli.VolumeInspect(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if lv.Labels[h.ns+".home_seed"] != "true" || lv.Labels[h.ns+".id"] != sb.ID {
		t.Fatalf("the live HOME seed volume's labels: %v", lv.Labels)
	}
	// What the dead gateway left: the seed volume, labelled as the driver labels it, and no container.
	orphan := h.ns + "-sb-0123456789ab-home-seed"
	if _, err := h.cli.VolumeCreate(ctx, volume.CreateOptions{Name: orphan, Labels: map[string]string{
		h.ns + ".managed": "true", h.ns + ".instance": h.mgr.Instance(), h.ns + ".home_seed": "true",
		h.ns + ".id": "sb-0123456789ab", "sandgate.home_seed": "true"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.cli.VolumeRemove(context.Background(), orphan, true) })
	// Older than the 1 ms minimum age by the time the collector looks (Docker records creation to the second).
	rep := h.mgr.SweepOrphans(ctx)
	if _, err := h.cli.VolumeInspect(ctx, orphan); !cerrdefs.IsNotFound(err) {
		t.Fatalf("orphan HOME seed volume survived the sweep (%+v): %v", rep, err)
	}
	if rep.OrphanVolumes != 1 || rep.Errors != 0 {
		t.Errorf("sweep report: %+v", rep)
	}
	if _, err := h.cli.VolumeInspect(ctx, live); err != nil {
		t.Fatalf("the live sandbox's HOME seed volume was swept: %v", err)
	}
	if got, _ := h.mgr.Get(ctx, sb.ID); got == nil || got.Status != sandboxes.StatusReady {
		t.Fatalf("the sandbox after the sweep: %+v", got)
	}
}

// TestAnyImageEntrypointExitIsTypedCrash: an image's entrypoint that exits non-zero ends the sandbox with a typed
// crash reason naming its exit code, as a crash of our own agent does.
func TestAnyImageEntrypointExitIsTypedCrash(t *testing.T) {
	agentImg, img := anyImages(t)
	p := smallProfile("failing", img)
	p.Capabilities = []string{sandboxes.CapShell}
	p.Entrypoint = []string{"/bin/sh", "-c", "echo 'entrypoint: giving up' >&2; exit 3"}
	p.CrashLimit = -1
	h := newHarnessImage(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, AgentImage: agentImg}, img)
	events, unsub := h.mgr.Subscribe(64)
	defer unsub()
	sb := h.create("failing")
	ev := h.waitEvent(events, testenv.WaitLimit, func(ev sandboxes.Event) bool {
		return ev.SandboxID == sb.ID && ev.Type == sandboxes.EventDied
	})
	if ev.Death == nil || ev.Death.Reason != "exit" || ev.Death.ExitCode != 3 || ev.Death.Message != "exit 3" {
		t.Fatalf("death: %+v", ev.Death)
	}
	got, err := h.mgr.Get(context.Background(), sb.ID)
	if err != nil || got.Status != sandboxes.StatusFailed || got.Died == nil || got.Died.ExitCode != 3 {
		t.Fatalf("sandbox after the entrypoint's exit: %+v %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	if _, err := h.mgr.EnsureRunning(ctx, sb.ID); sandboxes.ErrorCode(err) != sandboxes.CodeContainerDied {
		t.Fatalf("ensure running a crashed sandbox: %v", err)
	}
	// The dead container is kept with its log, the evidence of why, until the sandbox is deleted.
	if l := h.containerLog(sb.ID); !strings.Contains(l, "entrypoint: giving up") || !strings.Contains(l, "the image's entrypoint exited") {
		t.Fatalf("container log: %s", l)
	}
	if err := h.mgr.Delete(context.Background(), sb.ID); err != nil || h.containerExists(sb.ID) {
		t.Fatalf("delete: %v, container left: %v", err, h.containerExists(sb.ID))
	}
}

// TestAnyImageOwnImageInjected: our own image with the agent injected still works: the volume's agent serves and
// the image's entrypoint (the agent itself) is not started a second time. Under runc and under gVisor.
func TestAnyImageOwnImageInjected(t *testing.T) {
	eachRuntime(t, anyImageOwnImageInjected)
}

func anyImageOwnImageInjected(t *testing.T, runtime string) {
	p := runtimeProfile("own", runtime)
	p.InjectAgent = true
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, AgentImage: testenv.Image(t, "base")})
	sb := h.create("own")
	tg := h.ready(sb.ID)
	agent := h.agent(tg)
	res, err := agent.Exec(context.Background(), agentapi.ExecRequest{Cmd: "python3 -c 'print(6*7)'"})
	if err != nil || res.Stdout != "42\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	info, err := agent.Info(context.Background())
	if err != nil || info.Entrypoint != nil {
		t.Fatalf("info: %+v %v", info, err)
	}
	if ep := h.inspect(sb.ID).Config.Entrypoint; !slices.Equal(ep, []string{"/opt/sandgate/sandgate-agent", "supervise", "--"}) {
		t.Fatalf("entrypoint %q", ep)
	}
}

// TestAnyImageCrashWhileStartingRecovers: an entrypoint that dies while the sandbox starts leaves the dead container
// (and its log); under the default crash limit the next use starts that same container again on the same
// workspace, and the sandbox becomes ready.
func TestAnyImageCrashWhileStartingRecovers(t *testing.T) {
	agentImg, img := anyImages(t)
	p := smallProfile("flaky", img)
	p.Capabilities = []string{sandboxes.CapShell}
	p.Entrypoint = []string{"/bin/sh", "-c", "if [ -e /workspace/.crashed ]; then exec sleep infinity; fi; touch /workspace/.crashed; exit 7"}
	h := newHarnessImage(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, AgentImage: agentImg}, img)
	events, unsub := h.mgr.Subscribe(64)
	defer unsub()
	sb := h.create("flaky")
	ev := h.waitEvent(events, testenv.WaitLimit, func(ev sandboxes.Event) bool {
		return ev.SandboxID == sb.ID && ev.Type == sandboxes.EventDied
	})
	if ev.Death == nil || ev.Death.ExitCode != 7 {
		t.Fatalf("death: %+v", ev.Death)
	}
	first := h.inspect(sb.ID).ID
	var tg sandboxes.Target
	h.waitFor("the rebuilt sandbox", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
		defer cancel()
		var err error
		tg, err = h.mgr.EnsureRunning(ctx, sb.ID)
		if err != nil && sandboxes.ErrorCode(err) != sandboxes.CodeNotReady {
			t.Fatalf("ensure running after one crash: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
	if again := h.inspect(sb.ID).ID; again != first {
		t.Fatalf("the recovery made a new container %s, want the kept %s started again", again, first)
	}
	info, err := h.agent(tg).Info(context.Background())
	if err != nil || info.Entrypoint == nil || !info.Entrypoint.Running {
		t.Fatalf("entrypoint after recovery: %+v %v", info.Entrypoint, err)
	}
	got, err := h.mgr.Get(context.Background(), sb.ID)
	if err != nil || got.Status != sandboxes.StatusReady || !strings.Contains(got.LastError, "exit 7") {
		t.Fatalf("after recovery: %+v %v", got, err)
	}
}

// TestImagePresent: the engine is asked, nothing is pulled; an image it lacks is the caller's image_not_found.
func TestImagePresent(t *testing.T) {
	testenv.Integration(t)
	drv, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := context.Background()
	if err := drv.ImagePresent(ctx, "debian:bookworm-slim"); err != nil {
		t.Fatalf("a local image: %v", err)
	}
	absent := testenv.Unique("sgabsent") + "/never-built:1"
	if err := drv.ImagePresent(ctx, absent); sandboxes.ErrorCode(err) != sandboxes.CodeImageNotFound {
		t.Fatalf("an absent image: %v", err)
	}
	if out, _ := exec.Command("docker", "images", "-q", absent).Output(); len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("%s was pulled", absent)
	}
}
