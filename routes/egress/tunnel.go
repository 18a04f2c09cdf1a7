package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// What one sandbox may hold open through the proxy, and for how long without traffic. Every CONNECT tunnel costs
// the gateway two descriptors and two goroutines for as long as it lives, so without these a sandbox could open
// tunnels to an allowed host until the gateway ran out of descriptors (issue 33).
const (
	// DefaultMaxTunnels is a sandbox's concurrent upstream connections (tunnels and forwarded requests) when
	// Proxy.MaxTunnels is 0: several times what a browser or a package manager opens at once.
	DefaultMaxTunnels = 128
	// DefaultIdleTimeout closes a tunnel that carried no byte either way for this long when Proxy.IdleTimeout is
	// 0: Caddy's own idle timeout for keep-alive connections.
	DefaultIdleTimeout = 5 * time.Minute
	// maxConnectTarget is the longest host:port a CONNECT may name: a 253-byte name, brackets, colon, 5 digits.
	maxConnectTarget = 253 + 2 + 1 + 5
)

// limiter counts each sandbox's open upstream connections.
type limiter struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes one of sandbox's max slots; false when it holds them all. Every true is paired with a release.
func (l *limiter) acquire(sandbox string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[sandbox] >= max {
		return false
	}
	if l.open == nil {
		l.open = map[string]int{}
	}
	l.open[sandbox]++
	return true
}

func (l *limiter) release(sandbox string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[sandbox] <= 1 {
		delete(l.open, sandbox) // the map holds only sandboxes with something open
		return
	}
	l.open[sandbox]--
}

// Open is how many upstream connections sandbox holds through the proxy now.
func (p *Proxy) Open(sandbox string) int {
	p.limits.mu.Lock()
	defer p.limits.mu.Unlock()
	return p.limits.open[sandbox]
}

// overLimit answers a sandbox that already holds all its connections: 429, so a client backs off rather than
// treating it as a policy refusal. The connection is closed after the answer, so a flood does not keep it either.
func (p *Proxy) overLimit(w http.ResponseWriter, client Client, host string) {
	p.Logger.Warn("egress refused", "sandbox", client.SandboxID, "host", host, "reason", "connection limit",
		"limit", p.MaxTunnels)
	w.Header().Set("X-Sandgate-Egress", "limit")
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("sandgate egress: sandbox %s already holds %d open connections through the proxy, its limit; "+
		"close one and retry", client.SandboxID, p.MaxTunnels), http.StatusTooManyRequests)
}

// tunnel relays bytes between two connections until both directions end, either side fails, or nothing has moved
// in either direction for idle.
type tunnel struct {
	idle time.Duration
	last atomic.Int64 // UnixNano of the last byte read or written either way
	a, b net.Conn
	once sync.Once
}

// relay runs a tunnel between a and b and closes both when it ends. It uses one goroutine besides the caller's.
func relay(a, b net.Conn, idle time.Duration) {
	t := &tunnel{idle: idle, a: a, b: b}
	t.touch()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.pipe(b, a)
	}()
	t.pipe(a, b)
	<-done
	t.closeBoth()
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// deadline is when the tunnel goes idle unless a byte moves before then.
func (t *tunnel) deadline() time.Time { return time.Unix(0, t.last.Load()).Add(t.idle) }

// idleNow reports whether the tunnel has been idle for the whole timeout.
func (t *tunnel) idleNow() bool { return !time.Now().Before(t.deadline()) }

func (t *tunnel) closeBoth() {
	t.once.Do(func() {
		_ = t.a.Close()
		_ = t.b.Close()
	})
}

// pipe copies src to dst. A read or write that times out only ends the tunnel when the other direction has not
// moved either (the deadline is pushed to the last activity); src's EOF half-closes dst; any other error closes both.
func (t *tunnel) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		_ = src.SetReadDeadline(t.deadline())
		n, err := src.Read(buf)
		if n > 0 {
			t.touch()
			if !t.write(dst, buf[:n]) {
				return
			}
		}
		switch {
		case err == nil:
		case isTimeout(err) && !t.idleNow():
			// The other direction moved since this read started: wait again from its last byte.
		case errors.Is(err, io.EOF):
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			t.closeBoth()
			return
		default:
			t.closeBoth()
			return
		}
	}
}

// write writes all of b to dst, allowing a stalled peer as long as the tunnel is not idle; false when the tunnel
// is over.
func (t *tunnel) write(dst net.Conn, b []byte) bool {
	for len(b) > 0 {
		_ = dst.SetWriteDeadline(t.deadline())
		n, err := dst.Write(b)
		if n > 0 {
			t.touch()
			b = b[n:]
		}
		if err != nil && !(isTimeout(err) && !t.idleNow()) {
			t.closeBoth()
			return false
		}
	}
	return true
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
