package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Redis is Debian's redis-server run by a test on a free loopback port, with its own dir and no persistence.
type Redis struct {
	// Addr is host:port.
	Addr string
	// Password is what clients must send (AUTH); the server refuses clients without it.
	Password string
	// Logs is what it printed.
	Logs *SyncBuffer
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis runs redis-server and waits until it answers; it stops when the test ends. Without redis-server
// installed the test skips (scripts/prereqs.sh redis installs it).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (scripts/prereqs.sh redis)")
	}
	r := &Redis{dir: t.TempDir(), port: FreePort(t), Password: randHex(16), Logs: &SyncBuffer{}}
	r.Addr = fmt.Sprintf("127.0.0.1:%d", r.port)
	r.Start(t)
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("redis-server log:\n%s", r.Logs.String())
		}
	})
	return r
}

// Start (re)starts the server on the same address after Stop.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	conf := filepath.Join(r.dir, "redis.conf")
	// No RDB and no AOF: each run starts empty and writes nothing outside its dir. noeviction is Redis's default,
	// and what the stores require; set it so a distribution default cannot change it under the tests.
	body := fmt.Sprintf("bind 127.0.0.1\nport %d\ndir %s\nsave \"\"\nappendonly no\ndaemonize no\n"+
		"requirepass %s\nmaxmemory-policy noeviction\nlogfile \"\"\n", r.port, r.dir, r.Password)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command("redis-server", conf)
	r.cmd.Stdout, r.cmd.Stderr = r.Logs, r.Logs
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	deadline := time.Now().Add(WaitLimit)
	for {
		select {
		case <-r.done:
			t.Fatalf("redis-server exited at start:\n%s", r.Logs.String())
		default:
		}
		if c, err := net.Dial("tcp", r.Addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s", r.Addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server and waits until it has exited: Redis is down.
func (r *Redis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}
