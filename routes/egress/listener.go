package egress

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
)

// DefaultMaxConnsPerSource is LimitSources' cap when max is 0: twice DefaultMaxTunnels, so a sandbox at its
// tunnel cap still has room for keep-alive connections and request heads.
const DefaultMaxConnsPerSource = 2 * DefaultMaxTunnels

// LimitSources wraps the proxy's listener so that one source address (one sandbox) holds at most max accepted
// connections at once, in whatever state: a request head still arriving, keep-alive between requests, a tunnel.
// The handler's tunnel cap only sees requests whose head has arrived; this bounds the connections before that, so a
// sandbox that opens connections and trickles their heads (slowloris) uses up its own share, not the gateway's
// descriptors. A connection over the cap is closed as soon as it is accepted. How long a head may take is the
// server's read-header timeout, and how big it may be is the server's max header size.
func LimitSources(ln net.Listener, max int, logger *slog.Logger) net.Listener {
	if max <= 0 {
		max = DefaultMaxConnsPerSource
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &sourceLimiter{Listener: ln, max: max, log: logger, open: map[netip.Addr]int{}}
}

type sourceLimiter struct {
	net.Listener
	max int
	log *slog.Logger

	mu   sync.Mutex
	open map[netip.Addr]int
}

// Accept returns the next connection whose source is under its cap, closing those that are not.
func (l *sourceLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := netip.Addr{}
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			src = ap.Addr().Unmap()
		}
		if l.take(src) {
			return &limitedConn{Conn: c, release: func() { l.give(src) }}, nil
		}
		// Debug, not Warn: the flood would otherwise be a flood of log lines too.
		l.log.Debug("egress connection refused", "source", src.String(), "reason", "connection limit", "limit", l.max)
		_ = c.Close()
	}
}

func (l *sourceLimiter) take(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src] >= l.max {
		return false
	}
	l.open[src]++
	return true
}

func (l *sourceLimiter) give(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src] <= 1 {
		delete(l.open, src)
		return
	}
	l.open[src]--
}

// limitedConn gives its slot back on the first Close; net/http hands this same conn to a CONNECT's hijacker, so
// a tunnel's close releases it too.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes, so a tunnel through a limited listener keeps its half-close.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
