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
	// CAPath is the PEM certificate a TLS client must trust (StartRedisTLS); empty for plain TCP.
	CAPath string
	dir    string
	port   int
	cmd    *exec.Cmd
	done   chan struct{}
}

// StartRedis runs redis-server and waits until it answers; it stops when the test ends. Without redis-server
// installed the test skips (scripts/prereqs.sh redis installs it).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return startRedis(t, false)
}

// StartRedisTLS is StartRedis serving TLS only, with a self-signed certificate for 127.0.0.1 (CAPath) and no
// client certificates.
func StartRedisTLS(t testing.TB) *Redis {
	t.Helper()
	return startRedis(t, true)
}

func startRedis(t testing.TB, withTLS bool) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (scripts/prereqs.sh redis)")
	}
	r := &Redis{dir: t.TempDir(), port: FreePort(t), Password: randHex(16), Logs: &SyncBuffer{}}
	r.Addr = fmt.Sprintf("127.0.0.1:%d", r.port)
	if withTLS {
		r.CAPath = filepath.Join(r.dir, "cert.pem")
		out, err := exec.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
			filepath.Join(r.dir, "key.pem"), "-out", r.CAPath, "-days", "2", "-subj", "/CN=127.0.0.1",
			"-addext", "subjectAltName=IP:127.0.0.1").CombinedOutput()
		if err != nil {
			t.Fatalf("openssl: %v\n%s", err, out)
		}
	}
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
	body := fmt.Sprintf("bind 127.0.0.1\ndir %s\nsave \"\"\nappendonly no\ndaemonize no\n"+
		"requirepass %s\nmaxmemory-policy noeviction\nlogfile \"\"\n", r.dir, r.Password)
	if r.CAPath != "" {
		body += fmt.Sprintf("port 0\ntls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"+
			"tls-auth-clients no\n", r.port, r.CAPath, filepath.Join(r.dir, "key.pem"), r.CAPath)
	} else {
		body += fmt.Sprintf("port %d\n", r.port)
	}
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
