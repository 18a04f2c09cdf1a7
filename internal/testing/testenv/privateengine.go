package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	docker "github.com/docker/docker/client"
)

// PrivateEngine is a Docker engine of one test's own: its own dockerd with its own data root, exec root, socket,
// pid file, containerd (the one dockerd manages, under the exec root, in containerd namespaces of its own) and
// cgroup parent, and no bridge or iptables rules of its own. A test may kill it (SIGKILL, as a crash would) and
// start it again; the machine's shared engine is never touched. Sandboxes on it need profiles with network none:
// it makes no bridge, and our drivers' bridge networks belong on the shared engine.
type PrivateEngine struct {
	t    testing.TB
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	logs *SyncBuffer
}

// StartPrivateEngine starts a private engine and loads images (names on the shared engine) into it. It skips the
// test when not root or when dockerd is not installed, and stops the engine and removes everything of it when the
// test ends.
func StartPrivateEngine(t testing.TB, images ...string) *PrivateEngine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private Docker engine needs root")
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("dockerd is not installed: no private engine")
	}
	dir, err := os.MkdirTemp("", "sg-engine-")
	if err != nil {
		t.Fatal(err)
	}
	e := &PrivateEngine{t: t, dir: dir, logs: &SyncBuffer{}}
	t.Cleanup(e.remove)
	e.Start()
	for _, img := range images {
		save := exec.Command("docker", "save", img)
		load := exec.Command("docker", "-H", e.Host(), "load", "-q")
		pipe, err := save.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		load.Stdin = pipe
		var out strings.Builder
		load.Stdout, load.Stderr = &out, &out
		if err := save.Start(); err != nil {
			t.Fatalf("docker save %s: %v", img, err)
		}
		if err := load.Run(); err != nil {
			t.Fatalf("loading %s into the private engine: %v %s", img, err, out.String())
		}
		if err := save.Wait(); err != nil {
			t.Fatalf("docker save %s: %v", img, err)
		}
	}
	return e
}

// Host is the engine's endpoint in DOCKER_HOST form.
func (e *PrivateEngine) Host() string { return "unix://" + filepath.Join(e.dir, "docker.sock") }

// Client is a Docker client of the private engine; the caller closes it.
func (e *PrivateEngine) Client() *docker.Client {
	e.t.Helper()
	cli, err := docker.NewClientWithOpts(docker.WithHost(e.Host()), docker.WithAPIVersionNegotiation())
	if err != nil {
		e.t.Fatal(err)
	}
	return cli
}

// Start starts dockerd and waits until it answers. It is called by StartPrivateEngine, and again after Kill.
func (e *PrivateEngine) Start() {
	e.t.Helper()
	e.cmd = exec.Command("dockerd",
		"--data-root", filepath.Join(e.dir, "data"), "--exec-root", filepath.Join(e.dir, "exec"),
		"--pidfile", filepath.Join(e.dir, "dockerd.pid"), "-H", e.Host(),
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--ip6tables=false",
		"--containerd-namespace", "sg-"+filepath.Base(e.dir), "--containerd-plugins-namespace", "sg-plugins-"+filepath.Base(e.dir),
		"--cgroup-parent", "/"+filepath.Base(e.dir))
	e.cmd.Stdout, e.cmd.Stderr = e.logs, e.logs
	// Its own session: a signal to the test's process group never reaches it. Its own network namespace: a dockerd
	// started with --bridge=none deletes the host's docker0 at start (it takes the default bridge it would not
	// make for a stale one of its own), which breaks every default-network container and `docker build` RUN step
	// of the shared engine; in a namespace of its own it sees no docker0 but its own.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWNET}
	if err := e.cmd.Start(); err != nil {
		e.t.Fatalf("starting a private dockerd: %v", err)
	}
	e.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(e.cmd, e.done)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		if exec.CommandContext(ctx, "docker", "-H", e.Host(), "version").Run() == nil {
			return
		}
		select {
		case <-e.done:
			e.t.Fatalf("the private dockerd exited at start:\n%s", e.logs.String())
		case <-ctx.Done():
			e.t.Fatalf("the private dockerd did not answer within 2m:\n%s", e.logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL to dockerd, as a crash would (not a clean stop), and waits until it is gone. Its containerd
// goes with it (dockerd starts it with a parent-death signal); the containers' shims stay, as after a real crash.
func (e *PrivateEngine) Kill() {
	e.t.Helper()
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.done
	e.cmd = nil
	// Its containerd exits on the parent-death signal, winding down for a moment; a dockerd started meanwhile
	// would find it "still running", wait on its closing socket and give up. Wait until it is gone, as a
	// supervisor restarting a crashed engine effectively does.
	pid := 0
	if b, err := os.ReadFile(filepath.Join(e.dir, "exec", "containerd", "containerd.pid")); err == nil {
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	deadline := time.Now().Add(time.Minute)
	for pid > 0 && syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			e.t.Fatalf("the private engine's containerd (pid %d) still runs a minute after dockerd was killed", pid)
		}
		time.Sleep(20 * time.Millisecond) // polling a process's existence: there is no event to wait on
	}
}

// Logs is what the engine printed so far.
func (e *PrivateEngine) Logs() string { return e.logs.String() }

// remove stops the engine (its containers first) and removes its directories.
func (e *PrivateEngine) remove() {
	if e.cmd != nil {
		if out, err := exec.Command("sh", "-c", "docker -H "+e.Host()+" ps -aq | xargs -r docker -H "+e.Host()+" rm -f").CombinedOutput(); err != nil {
			e.t.Logf("removing the private engine's containers: %v %s", err, out)
		}
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(time.Minute):
			_ = e.cmd.Process.Signal(syscall.SIGKILL)
			<-e.done
		}
		e.cmd = nil
	}
	if e.t.Failed() {
		e.t.Logf("private engine log:\n%s", e.logs.String())
	}
	// An engine that never came back (a failed restart) leaves its containerd and containers' shims, and their
	// containers, running: every process whose command line names the engine's directory is this engine's.
	e.killLeftovers()
	// Its cgroup parent, in each hierarchy (cgroup v1) or once (v2), emptied by now: removed deepest first.
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/" + filepath.Base(e.dir))
	hier = append(hier, filepath.Join("/sys/fs/cgroup", filepath.Base(e.dir)))
	for _, root := range hier {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
	// dockerd leaves its data root mounted (a private bind mount of itself) and may leave layer mounts.
	mounts, _ := os.ReadFile("/proc/self/mounts")
	var ours []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], e.dir+"/") {
			ours = append(ours, f[1])
		}
	}
	for i := len(ours) - 1; i >= 0; i-- { // deepest (latest) first
		if err := syscall.Unmount(ours[i], syscall.MNT_DETACH); err != nil {
			e.t.Logf("unmounting %s: %v", ours[i], err)
		}
	}
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Errorf("removing the private engine's directory: %v", err)
	}
}

// killLeftovers kills every process whose command line names the engine's directory, containers' processes first
// (the children of those processes), then the processes themselves.
func (e *PrivateEngine) killLeftovers() {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if !strings.Contains(string(cmd), e.dir+"/") {
			continue
		}
		children, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "task", p.Name(), "children"))
		for _, c := range strings.Fields(string(children)) {
			if cpid, err := strconv.Atoi(c); err == nil {
				_ = syscall.Kill(cpid, syscall.SIGKILL)
			}
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		e.t.Logf("killed a leftover process of the private engine: %d %s", pid, strings.ReplaceAll(string(cmd), "\x00", " "))
	}
}

// String names the engine in messages.
func (e *PrivateEngine) String() string { return fmt.Sprintf("private engine at %s", e.Host()) }
