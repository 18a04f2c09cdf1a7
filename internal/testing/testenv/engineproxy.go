package testenv

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// EngineProxy is a unix socket a test owns that forwards every connection to a Docker engine's socket, so a test
// can take "the engine's socket" away and bring it back without touching the engine itself (the engine is shared
// with other tests). Point the code under test at Host().
type EngineProxy struct {
	t      testing.TB
	path   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// StartEngineProxy listens on a new socket in a temporary directory and forwards to target, a unix socket path
// ("" is /var/run/docker.sock). It is closed when the test ends.
func StartEngineProxy(t testing.TB, target string) *EngineProxy {
	t.Helper()
	if target == "" {
		target = "/var/run/docker.sock"
	}
	dir, err := os.MkdirTemp("", "sg-engine-proxy-")
	if err != nil {
		t.Fatal(err)
	}
	p := &EngineProxy{t: t, path: filepath.Join(dir, "docker.sock"), target: target, conns: map[net.Conn]bool{}}
	p.Up()
	t.Cleanup(func() {
		p.Down()
		p.wg.Wait()
		os.RemoveAll(dir)
	})
	return p
}

// Host is the proxy's address in DOCKER_HOST form.
func (p *EngineProxy) Host() string { return "unix://" + p.path }

// Down takes the socket away as a dead or restarting engine does: the listener closes and its file goes (new
// connections fail with "no such file"), and every open connection (an event stream, a call in flight) is cut.
func (p *EngineProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	p.ln.Close() // removes the socket file too (net.UnixListener unlinks on close)
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// Up brings the socket back at the same path.
func (p *EngineProxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	_ = os.Remove(p.path)
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		p.t.Fatalf("engine proxy: listening on %s: %v", p.path, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
}

func (p *EngineProxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Down
		}
		up, err := net.Dial("unix", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(ln, c, up) {
			return
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track records a connection pair so Down can cut it; false when the listener went down meanwhile.
func (p *EngineProxy) track(ln net.Listener, c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		c.Close()
		up.Close()
		return false
	}
	p.conns[c], p.conns[up] = true, true
	return true
}

func (p *EngineProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src) // ends at EOF or when Down cuts the pair
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
