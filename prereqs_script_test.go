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

// TestPrereqsStartsDockerdInItsOwnSession runs scripts/prereqs.sh's start_dockerd, as `make run` would from a
// terminal (in a process group of its own, like a shell's foreground job), against a stand-in dockerd on PATH that
// records its pid and waits. The engine must come up in a session of its own, outside the caller's process group,
// so Ctrl-C on `make run` (SIGINT to that group) cannot reach it. The old `nohup dockerd &` left it in the group.
// The real engine is never touched: PATH's first docker and dockerd are the stand-ins.
func TestPrereqsStartsDockerdInItsOwnSession(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	// The stand-in engine: say its pid, answer `docker info` from then on, and wait until the test ends it.
	writeFile(t, filepath.Join(bin, "dockerd"), `#!/bin/sh
echo $$ > "$OUT/pid.tmp" && mv "$OUT/pid.tmp" "$OUT/pid"
exec sleep 600
`, 0o755)
	writeFile(t, filepath.Join(bin, "docker"), `#!/bin/sh
[ "$1" = info ] && [ -s "$OUT/pid" ]
`, 0o755)
	cmd := exec.Command("bash", "-c", `. scripts/prereqs.sh && start_dockerd`)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "OUT="+dir, "SANDGATE_STATE_DIR="+filepath.Join(dir, "state"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	pidText, readErr := os.ReadFile(filepath.Join(dir, "pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if pid > 0 {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
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
