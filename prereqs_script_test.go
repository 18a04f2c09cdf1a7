package sandgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// procIDs reads a process's process group and session from /proc/<pid>/stat (fields 5 and 6, after the
// parenthesised command name).
func procIDs(t *testing.T, pid int) (pgid, sid int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatalf("reading process %d: %v", pid, err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	pgid, _ = strconv.Atoi(f[2])
	sid, _ = strconv.Atoi(f[3])
	return pgid, sid
}

// standInEngine puts a stand-in dockerd and docker first on PATH, so scripts/prereqs.sh's start_dockerd runs against
// them and never touches the machine's real engine (its pid file is moved into the test's directory too). The
// stand-in dockerd runs dockerdBody; `docker info` answers once $OUT/pid exists. It returns the environment and $OUT.
func standInEngine(t *testing.T, dockerdBody string) (env []string, out string) {
	t.Helper()
	out = t.TempDir()
	bin := filepath.Join(out, "bin")
	writeFile(t, filepath.Join(bin, "dockerd"), "#!/bin/sh\necho start >> \"$OUT/starts\"\n"+dockerdBody, 0o755)
	writeFile(t, filepath.Join(bin, "docker"), `#!/bin/sh
[ "$1" = info ] && [ -s "$OUT/pid" ]
`, 0o755)
	env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "OUT="+out,
		"SANDGATE_STATE_DIR="+filepath.Join(out, "state"), "DOCKERD_PIDFILE="+filepath.Join(out, "docker.pid"),
		"SANDGATE_DOCKERD_WAIT=60")
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(out, "pid")); err == nil {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return env, out
}

// A stand-in engine that says its pid, answers from then on, and waits until the test ends it.
const standInServes = `echo $$ > "$OUT/pid.tmp" && mv "$OUT/pid.tmp" "$OUT/pid"
exec sleep 600
`

// starts counts the stand-in engine's starts.
func starts(t *testing.T, out string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "starts"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "start")
}

// TestPrereqsStartsDockerdInItsOwnSession runs scripts/prereqs.sh's start_dockerd, as `make run` would from a
// terminal (in a process group of its own, like a shell's foreground job), against a stand-in dockerd on PATH that
// records its pid and waits. The engine must come up in a session of its own, outside the caller's process group,
// so Ctrl-C on `make run` (SIGINT to that group) cannot reach it. The old `nohup dockerd &` left it in the group.
func TestPrereqsStartsDockerdInItsOwnSession(t *testing.T) {
	env, dir := standInEngine(t, standInServes)
	cmd := exec.Command("bash", "-c", `. scripts/prereqs.sh && start_dockerd`)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	pidText, readErr := os.ReadFile(filepath.Join(dir, "pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil || readErr != nil || pid <= 0 {
		t.Fatalf("start_dockerd: %v, pid %q (%v)\n%s", err, pidText, readErr, out)
	}
	callerGroup := cmd.Process.Pid // Setpgid: the script led its own group
	pgid, sid := procIDs(t, pid)
	if sid != pid || pgid != pid {
		t.Fatalf("dockerd runs in session %d, group %d; want a session and group of its own (%d)", sid, pgid, pid)
	}
	if pgid == callerGroup {
		t.Fatalf("dockerd is in the caller's process group %d: Ctrl-C would stop it", callerGroup)
	}
	if !strings.Contains(string(out), "stop it with") {
		t.Fatalf("start_dockerd does not say how to stop the engine:\n%s", out)
	}
}

// TestPrereqsStartsOneDockerdForConcurrentCallers: .ci/run ensures the engine from two steps at once (the images and
// runsc's registration). Each found no engine and started one; the second engine lost the data root's lock and exited,
// and CI failed with "dockerd did not answer within 30 s". Starts are serialised now: one engine for any number of
// callers.
func TestPrereqsStartsOneDockerdForConcurrentCallers(t *testing.T) {
	env, dir := standInEngine(t, `sleep 0.3
`+standInServes)
	const callers = 4
	errs := make(chan error, callers)
	outs := make(chan string, callers)
	for range callers {
		go func() {
			cmd := exec.Command("bash", "-c", `. scripts/prereqs.sh && start_dockerd`)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			outs <- string(out)
			errs <- err
		}()
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Errorf("start_dockerd: %v\n%s", err, <-outs)
		}
	}
	if n := starts(t, dir); n != 1 {
		t.Fatalf("%d concurrent callers started the engine %d times; want once", callers, n)
	}
}

// TestPrereqsRestartsADockerdThatExitsWhileStarting: an engine that exits while starting (here, as CI's did, because
// another engine still held the data root's lock) is started again, and what it said is printed, not only its log's
// name.
func TestPrereqsRestartsADockerdThatExitsWhileStarting(t *testing.T) {
	env, dir := standInEngine(t, `if [ ! -e "$OUT/failed-once" ]; then
	touch "$OUT/failed-once"
	echo "failed to start daemon: error while opening volume store metadata database: timeout" >&2
	exit 1
fi
`+standInServes)
	cmd := exec.Command("bash", "-c", `. scripts/prereqs.sh && start_dockerd`)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("start_dockerd: %v\n%s", err, out)
	}
	if n := starts(t, dir); n != 2 {
		t.Fatalf("the engine started %d times; want 2 (one exit, one start)\n%s", n, out)
	}
	if !strings.Contains(string(out), "volume store metadata database: timeout") {
		t.Fatalf("start_dockerd does not say why the engine exited:\n%s", out)
	}
}

// TestPrereqsWaitsForARunningDockerd: an engine that is alive but does not answer yet (still starting, or a stopped
// session's engine still shutting down, which keeps its pid file until every container has stopped) is waited for;
// starting a second one would race it for the data root's lock.
func TestPrereqsWaitsForARunningDockerd(t *testing.T) {
	env, dir := standInEngine(t, standInServes)
	// The running engine: a live process named in the pid file, answering only once the test says so.
	engine := exec.Command("sleep", "600")
	if err := engine.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Process.Kill(); _ = engine.Wait() })
	writeFile(t, filepath.Join(dir, "docker.pid"), strconv.Itoa(engine.Process.Pid), 0o644)

	cmd := exec.Command("bash", "-c", `. scripts/prereqs.sh && start_dockerd`)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	said := make([]byte, 0, 512)
	buf := make([]byte, 512)
	for !strings.Contains(string(said), "waiting up to") {
		n, err := stderr.Read(buf)
		said = append(said, buf[:n]...)
		if err != nil {
			t.Fatalf("start_dockerd never said it waits for the running engine: %v\n%s", err, said)
		}
	}
	// The running engine answers now.
	writeFile(t, filepath.Join(dir, "pid"), strconv.Itoa(engine.Process.Pid), 0o644)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("start_dockerd: %v\n%s", err, said)
	}
	if n := starts(t, dir); n != 0 {
		t.Fatalf("start_dockerd started %d engines beside a running one; want none", n)
	}
}
