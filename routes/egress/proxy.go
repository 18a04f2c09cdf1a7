package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client is a sandbox using the proxy.
type Client struct {
	SandboxID string
	Policy    Policy
}

// Directory finds the sandbox behind a source address (its address on the sandbox network).
type Directory interface {
	BySourceIP(ip netip.Addr) (Client, bool)
}

// Proxy is the forward proxy. It is an http.Handler; serve it on an address the sandboxes reach (the internal
// network's gateway address).
type Proxy struct {
	Directory Directory
	Logger    *slog.Logger
	// DialTimeout bounds connecting upstream; default 10 s.
	DialTimeout time.Duration
	// Resolver resolves names; nil uses net.DefaultResolver.
	Resolver *net.Resolver
	// MaxTunnels caps one sandbox's concurrent upstream connections: CONNECT tunnels and forwarded requests
	// (including dials in progress); default DefaultMaxTunnels. Over it, a request is answered 429.
	MaxTunnels int
	// IdleTimeout closes a tunnel, or a forwarded response, that moved no byte in either direction for this long;
	// default DefaultIdleTimeout.
	IdleTimeout time.Duration

	once      sync.Once
	transport *http.Transport
	limits    limiter
}

// hop-by-hop headers (RFC 9110 7.6.1) plus the proxy's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

type policyKey struct{}

func (p *Proxy) init() {
	p.once.Do(func() {
		if p.Logger == nil {
			p.Logger = slog.Default()
		}
		if p.DialTimeout == 0 {
			p.DialTimeout = 10 * time.Second
		}
		if p.MaxTunnels <= 0 {
			p.MaxTunnels = DefaultMaxTunnels
		}
		if p.IdleTimeout <= 0 {
			p.IdleTimeout = DefaultIdleTimeout
		}
		p.transport = &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				pol, _ := ctx.Value(policyKey{}).(Policy)
				return p.dial(ctx, pol, addr)
			},
			Proxy:                 nil, // never chain to the gateway's own proxy settings
			MaxIdleConns:          64,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			// Connections are per policy (the dial checks it), so they must not be shared between sandboxes.
			DisableKeepAlives: true,
		}
	})
}

// RefusedError is a request the policy refused.
type RefusedError struct{ Host, Reason string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress to %s refused: %s", e.Host, e.Reason)
}

// dial connects to addr, checking every resolved address against pol before it is used.
func (p *Proxy) dial(ctx context.Context, pol Policy, addr string) (net.Conn, error) {
	// The address policy runs in the dialer's Control, on the address actually dialled after resolution: the last
	// word on private and metadata ranges.
	d := pol.Rules().Dialer(p.DialTimeout, p.Resolver)
	return d.DialContext(ctx, "tcp", addr)
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.init()
	src := sourceIP(r)
	client, ok := p.Directory.BySourceIP(src)
	if !ok {
		p.Logger.Warn("egress refused", "source", src.String(), "host", r.Host, "reason", "not a sandbox")
		http.Error(w, "sandgate egress: the source address is not a sandbox", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodConnect {
		p.serveConnect(w, r, client)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" || (r.URL.Scheme != "http") {
		http.Error(w, "sandgate egress: a forward proxy takes CONNECT or absolute http:// URLs", http.StatusBadRequest)
		return
	}
	host := r.URL.Hostname()
	if ok, why := client.Policy.AllowsHost(host); !ok {
		p.refuse(w, client, host, why)
		return
	}
	if !p.limits.acquire(client.SandboxID, p.MaxTunnels) {
		p.overLimit(w, client, host)
		return
	}
	defer p.limits.release(client.SandboxID)
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), policyKey{}, client.Policy))
	defer cancel()
	out := r.Clone(ctx)
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.upstreamError(w, client, host, err)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	p.copyIdle(w, resp.Body, cancel)
}

// copyIdle copies a forwarded response's body, ending it (cancel aborts the upstream read) when neither reading
// from upstream nor writing to the sandbox has progressed for the idle timeout.
func (p *Proxy) copyIdle(w http.ResponseWriter, body io.Reader, cancel context.CancelFunc) {
	stall := time.AfterFunc(p.IdleTimeout, cancel)
	defer stall.Stop()
	rc := http.NewResponseController(w)
	// The deadline covers each chunk's write and flush; it is lifted at the end so the server's final flush of
	// the response is not cut by a deadline that has passed meanwhile.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		stall.Reset(p.IdleTimeout)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(p.IdleTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			// Flushed per chunk: what upstream sent reaches the sandbox now (streams, server-sent events), not
			// when a buffer fills.
			if rc.Flush() != nil {
				return
			}
			stall.Reset(p.IdleTimeout)
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request, client Client) {
	host, port, err := ConnectTarget(r.Host)
	if err != nil {
		http.Error(w, "sandgate egress: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ok, why := client.Policy.AllowsHost(host); !ok {
		p.refuse(w, client, host, why)
		return
	}
	if !p.limits.acquire(client.SandboxID, p.MaxTunnels) {
		p.overLimit(w, client, host)
		return
	}
	defer p.limits.release(client.SandboxID)
	ctx, cancel := context.WithTimeout(r.Context(), p.DialTimeout)
	// The dial goes to the target as parsed and authorised, not to the raw text.
	upstream, err := p.dial(ctx, client.Policy, net.JoinHostPort(host, strconv.Itoa(int(port))))
	cancel()
	if err != nil {
		p.upstreamError(w, client, host, err)
		return
	}
	rc := http.NewResponseController(w)
	conn, brw, err := rc.Hijack()
	if err != nil {
		upstream.Close()
		http.Error(w, "sandgate egress: cannot take over the connection", http.StatusInternalServerError)
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		conn.Close()
		upstream.Close()
		return
	}
	p.Logger.Debug("egress tunnel", "sandbox", client.SandboxID, "host", r.Host)
	// Bytes the client sent after the CONNECT head are already buffered.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		_ = upstream.SetWriteDeadline(time.Now().Add(p.IdleTimeout))
		if _, err := upstream.Write(b); err != nil {
			conn.Close()
			upstream.Close()
			return
		}
	}
	relay(conn, upstream, p.IdleTimeout)
}

func (p *Proxy) refuse(w http.ResponseWriter, client Client, host, why string) {
	p.Logger.Warn("egress refused", "sandbox", client.SandboxID, "host", host, "reason", why)
	w.Header().Set("X-Sandgate-Egress", "refused")
	http.Error(w, fmt.Sprintf("sandgate egress: %s refused for sandbox %s: %s", host, client.SandboxID, why), http.StatusForbidden)
}

func (p *Proxy) upstreamError(w http.ResponseWriter, client Client, host string, err error) {
	var refused *RefusedError
	if errors.As(err, &refused) {
		p.refuse(w, client, host, refused.Reason)
		return
	}
	p.Logger.Info("egress upstream failed", "sandbox", client.SandboxID, "host", host, "error", err)
	http.Error(w, "sandgate egress: "+strings.TrimSpace(err.Error()), http.StatusBadGateway)
}

func sourceIP(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
