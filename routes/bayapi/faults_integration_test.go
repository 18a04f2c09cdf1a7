package bayapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// Fault tests of issue 34 that need a real gateway process and the real engine: the gateway killed with kill -9 in
// the middle of a workspace copy, and a sandbox's agent killed in the middle of an exec. (The engine's own faults
// are in sandboxes/docker/faults_test.go.)

// treeScript writes /workspace/tree: dirs×files random files of 2 KiB, enough files that copying them takes an
// observable while (the copy's cost is per file), and prints a digest of the whole tree.
func treeScript(dirs, files int) string {
	return fmt.Sprintf(`python3 -c "
import os
for i in range(%d):
    os.makedirs(f'tree/{i}', exist_ok=True)
    for j in range(%d):
        with open(f'tree/{i}/{j}', 'wb') as f:
            f.write(os.urandom(2048))
" && %s`, dirs, files, treeDigest)
}

const treeDigest = `find tree -type f | sort | xargs cat | sha256sum`

// managedVolumes lists the engine's volumes of namespace ns (name → mountpoint) whose labels include those of with.
func managedVolumes(t *testing.T, ns string, with ...string) map[string]string {
	t.Helper()
	args := []string{"volume", "ls", "-q", "--filter", "label=" + ns + ".managed"}
	for _, l := range with {
		args = append(args, "--filter", "label="+l)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker volume ls: %v", err)
	}
	vols := map[string]string{}
	for _, name := range strings.Fields(string(out)) {
		mp, err := exec.Command("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", name).Output()
		if err != nil {
			continue // removed since the listing
		}
		vols[name] = strings.TrimSpace(string(mp))
	}
	return vols
}

// workspaceVolume is the volume mounted at /workspace in container.
func workspaceVolume(t *testing.T, container string) string {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/workspace"}}{{.Name}}{{end}}{{end}}`, container).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("the workspace volume of %s: %v %q", container, err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitCopyInto waits until a volume of ns with the label with, other than except, has the copy's first entries in it
// (its "tree" directory), and returns its name.
func waitCopyInto(ctx context.Context, t *testing.T, ns, with, except string, call <-chan error) string {
	t.Helper()
	for {
		for name, mp := range managedVolumes(t, ns, with) {
			if name == except {
				continue
			}
			if entries, err := os.ReadDir(filepath.Join(mp, "tree")); err == nil && len(entries) > 0 {
				return name
			}
		}
		select {
		case err := <-call:
			t.Fatalf("the call ended before its copy was seen under way: %v", err)
		case <-ctx.Done():
			t.Fatalf("no copy seen under way into a volume labelled %s: %v", with, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestGatewayKilledMidSnapshotAndFork kills the gateway with SIGKILL while it copies a running sandbox's workspace
// (a snapshot, then a fork), with the source frozen for the copy, and restarts it on the same data dir. After each
// restart: the source is thawed and ready with its files intact, no snapshot, sandbox or cargo record of the
// half-made copy exists, every record's volume exists, and the half-made volume is gone (the first orphan sweep
// after a start removes what the dead process left, however young), leaving exactly the source's volume.
func TestGatewayKilledMidSnapshotAndFork(t *testing.T) {
	g := startGateway(t, "", nil, true, func(s string) string {
		return strings.Replace(s, "on_exit destroy", "on_exit keep", 1)
	})
	creds := readCredentials(t, g.dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := client.New(g.url, creds.APIKey)
	sb, err := c.CreateSandbox(ctx, "python-default", 1800)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// 40,000 files: the copy takes seconds even on an idle host, and the test kills it within milliseconds of
	// its first entry.
	res, err := c.Shell(ctx, sb.ID, treeScript(200, 200), 300)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("writing the tree: %+v %v", res, err)
	}
	digest := res.Output
	container := g.ns + "-" + sb.ID
	srcVol := workspaceVolume(t, container)

	for _, op := range []struct {
		name, path, label string
	}{
		{"snapshot", "/snapshots", g.ns + ".snapshot"},
		{"fork", "/fork", g.ns + ".managed_workspace=true"},
	} {
		call := make(chan error, 1)
		go func() { call <- c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+op.path, map[string]any{}, nil) }()
		dst := waitCopyInto(ctx, t, g.ns, op.label, srcVol, call)
		g.Kill()
		if err := <-call; err == nil {
			t.Fatalf("%s: the call succeeded although the gateway was killed mid-copy", op.name)
		}
		// Nothing thaws the source once the gateway is dead: frozen now means the kill landed inside the copy.
		if !testenv.Frozen(t, container) {
			t.Fatalf("%s: the source was not frozen when the gateway died: the copy had ended (a faster host: make the tree bigger)", op.name)
		}
		left := managedVolumes(t, g.ns)
		if _, ok := left[dst]; !ok {
			t.Fatalf("%s: the half-made volume %s is not there after the kill: %v", op.name, dst, left)
		}
		g.Restart(g.caddyfile)
		restarted := time.Now()

		// The half-made volume goes with the first sweep after the start (not orphan_min_age, 5 minutes, later);
		// nothing else of ours is left.
		for {
			vols := managedVolumes(t, g.ns)
			if len(vols) == 1 && vols[srcVol] != "" {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: after the restart the namespace's volumes are %v, want only the source's %s", op.name, vols, srcVol)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Since(restarted) > 2*time.Minute {
				t.Fatalf("%s: 2 minutes after the restart the namespace's volumes are %v, want only the source's %s: the half-made volume waits for orphan_min_age", op.name, vols, srcVol)
			}
		}
		if _, err := c.WaitReady(ctx, sb.ID, 100*time.Millisecond); err != nil {
			t.Fatalf("%s: the source after the restart: %v", op.name, err)
		}
		if testenv.Frozen(t, container) {
			t.Fatalf("%s: the source is still frozen after the restart", op.name)
		}
		if out, err := c.Shell(ctx, sb.ID, treeDigest, 120); err != nil || out.Output != digest {
			t.Fatalf("%s: the source's tree after the restart: %+v %v, want %q", op.name, out, err, digest)
		}
		assertNoDanglingRecords(ctx, t, c, g.ns, sb.ID)
	}

	// The source still copies: a fork now completes, and the fork is deleted with its volume.
	var fork struct {
		Sandbox client.Sandbox `json:"sandbox"`
	}
	if err := c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/fork", map[string]any{}, &fork); err != nil {
		t.Fatalf("a fork after the restarts: %v", err)
	}
	if out, err := c.Shell(ctx, fork.Sandbox.ID, treeDigest, 120); err != nil || out.Output != digest {
		t.Fatalf("the fork's tree: %+v %v", out, err)
	}
	if err := c.DeleteSandbox(ctx, fork.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// assertNoDanglingRecords: the only sandbox is want, there is no snapshot, and every cargo record's volume exists.
func assertNoDanglingRecords(ctx context.Context, t *testing.T, c *client.Client, ns, want string) {
	t.Helper()
	var sbs struct {
		Items []client.Sandbox `json:"items"`
	}
	if err := c.Do(ctx, "GET", "/v1/sandboxes", nil, &sbs); err != nil {
		t.Fatal(err)
	}
	if len(sbs.Items) != 1 || sbs.Items[0].ID != want {
		t.Errorf("sandboxes after the restart: %+v, want only %s", sbs.Items, want)
	}
	var snaps struct{ Items []snapshotJSON }
	if err := c.Do(ctx, "GET", "/v1/snapshots", nil, &snaps); err != nil || len(snaps.Items) != 0 {
		t.Errorf("snapshots after the restart: %+v %v, want none", snaps.Items, err)
	}
	for _, managed := range []string{"true", "false"} {
		var cargos struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		if err := c.Do(ctx, "GET", "/v1/cargos?managed="+managed, nil, &cargos); err != nil {
			t.Fatal(err)
		}
		for _, cg := range cargos.Items {
			if err := exec.Command("docker", "volume", "inspect", ns+"-"+cg.ID).Run(); err != nil {
				t.Errorf("cargo %s is recorded but its volume %s-%s is missing", cg.ID, ns, cg.ID)
			}
		}
	}
}

// agentPID is the host pid of the agent in container: the child of the container's init (docker-init).
func agentPID(t *testing.T, container string) int {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", container).Output()
	if err != nil {
		t.Fatalf("inspecting %s: %v", container, err)
	}
	init := strings.TrimSpace(string(out))
	children, err := os.ReadFile(filepath.Join("/proc", init, "task", init, "children"))
	if err != nil {
		t.Fatalf("the children of %s's init: %v", container, err)
	}
	for _, f := range strings.Fields(string(children)) {
		cmd, _ := os.ReadFile(filepath.Join("/proc", f, "cmdline"))
		if strings.Contains(string(cmd), "sandgate-agent") {
			pid, _ := strconv.Atoi(f)
			return pid
		}
	}
	t.Fatalf("no sandgate-agent among the children %q of %s's init", children, container)
	return 0
}

// processRunning says whether a process whose command line contains marker runs on the host.
func processRunning(marker string) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), marker) {
			return true
		}
	}
	return false
}

// TestAgentKilledMidExec kills a sandbox's agent (SIGKILL, as tenant code or the OOM killer would) while an exec
// runs through the Bay API. The exec answers at once with a typed, retryable error (not a hang, not an untyped
// 500), and the sandbox recovers on the same workspace: calls answer the typed session_not_ready while it is
// rebuilt (ship_error only in the moment before the engine reports the container's exit), then succeed with the
// workspace's files intact.
func TestAgentKilledMidExec(t *testing.T) {
	g := startGateway(t, "", nil, true)
	creds := readCredentials(t, g.dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := client.New(g.url, creds.APIKey)
	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	if _, err := c.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Shell(ctx, sb.ID, "echo kept > kept.txt", 30); err != nil || r.ExitCode != 0 {
		t.Fatalf("writing a file: %+v %v", r, err)
	}
	container := g.ns + "-" + sb.ID
	marker := fmt.Sprintf("sleep 9%05d.5", time.Now().UnixNano()%100000)
	type result struct {
		res *client.ShellResult
		err error
		at  time.Time
	}
	call := make(chan result, 1)
	go func() {
		r, err := c.Shell(ctx, sb.ID, marker, 300)
		call <- result{r, err, time.Now()}
	}()
	for !processRunning(marker) {
		select {
		case r := <-call:
			t.Fatalf("the exec ended before it was seen running: %+v %v", r.res, r.err)
		case <-ctx.Done():
			t.Fatal("the exec was never seen running")
		case <-time.After(10 * time.Millisecond):
		}
	}
	killed := time.Now()
	if err := syscall.Kill(agentPID(t, container), syscall.SIGKILL); err != nil {
		t.Fatalf("killing the agent: %v", err)
	}
	r := <-call
	var ce *client.Error
	if !errors.As(r.err, &ce) {
		t.Fatalf("the exec whose agent was killed answered %+v %v, want a typed error", r.res, r.err)
	}
	t.Logf("the exec answered %s after the kill: %d %s: %s %v", r.at.Sub(killed).Round(time.Millisecond), ce.Status, ce.Code, ce.Message, ce.Details)
	if ce.Code == "" || ce.Status < 500 || !slices.Contains([]string{"session_not_ready", "ship_error", "container_died"}, ce.Code) {
		t.Fatalf("the exec whose agent was killed: %d %q %s, want a typed 5xx naming the loss", ce.Status, ce.Code, ce.Message)
	}
	if r.at.Sub(killed) > 30*time.Second {
		t.Errorf("the exec answered %s after its agent died", r.at.Sub(killed))
	}

	// Recovery: retryable answers while the sandbox is rebuilt on the same workspace, then success.
	for {
		out, err := c.Shell(ctx, sb.ID, "cat kept.txt", 30)
		if err == nil {
			if out.ExitCode != 0 || strings.TrimSpace(out.Output) != "kept" {
				t.Fatalf("the workspace after the recovery: %+v", out)
			}
			break
		}
		// session_not_ready while it is rebuilt; ship_error only until the engine has seen the container exit
		// (the agent's connection breaks first, and on a busy host the engine reports the exit a moment later).
		if !errors.As(err, &ce) || (ce.Code != "session_not_ready" && ce.Code != "ship_error") {
			t.Fatalf("an exec during the recovery: %v, want session_not_ready until it is back", err)
		}
		if ce.Code == "ship_error" && time.Since(killed) > 30*time.Second {
			t.Fatalf("an exec 30 s after the agent was killed: %v: the death was never noticed", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the sandbox did not recover: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	s, err := c.GetSandbox(ctx, sb.ID)
	if err != nil || s.Status != "ready" {
		b, _ := json.Marshal(s)
		t.Fatalf("after the recovery: %s %v", b, err)
	}
}
