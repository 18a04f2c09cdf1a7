package agentapi

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// EnvSocket names the UNIX socket the agent also serves on. A sandbox without a network interface (profile
// `network none`) is reachable only this way: the gateway bind-mounts the socket's directory from the host.
const EnvSocket = "SANDGATE_AGENT_SOCKET"

// UnixAddrPrefix marks an agent address that is a UNIX socket path: "unix//run/sandgate/ns/id/agent.sock", the
// form Caddy's reverse_proxy dials as it is.
const UnixAddrPrefix = "unix/"

// maxSocketPath is sun_path's capacity less its terminating NUL on Linux.
const maxSocketPath = 107

// MaxSocketPath is the longest UNIX socket path the kernel accepts.
func MaxSocketPath() int { return maxSocketPath }

// UnixAddr is the agent address of the socket at path.
func UnixAddr(path string) string { return UnixAddrPrefix + path }

// SocketPath returns the socket path of a UNIX agent address, or false for a TCP host:port.
func SocketPath(addr string) (string, bool) {
	path, ok := strings.CutPrefix(addr, UnixAddrPrefix)
	return path, ok && strings.HasPrefix(path, "/")
}

// unixBaseURL is the base URL of an agent reached over its socket by a per-call client; the host part is never
// resolved.
const unixBaseURL = "http://sandbox"

// socketHostSuffix ends the host name that stands for a socket path in a pooled transport's URLs (SocketTransport).
// ".invalid" (RFC 2606) never resolves, so a URL of this form that leaks to another client dials nothing.
const socketHostSuffix = ".sock.invalid"

// socketHostLabel is the length of the hex labels a socket host splits its path into (DNS's limit is 63).
const socketHostLabel = 60

// socketHost is the host name a SocketTransport dials as the socket at path: the path in hex, in labels.
func socketHost(path string) string {
	h := hex.EncodeToString([]byte(path))
	var b strings.Builder
	for len(h) > socketHostLabel {
		b.WriteString(h[:socketHostLabel])
		b.WriteByte('.')
		h = h[socketHostLabel:]
	}
	b.WriteString(h)
	b.WriteString(socketHostSuffix)
	return b.String()
}

// SocketHostError says a host name given to a SocketTransport's dialer names no socket.
type SocketHostError struct{ Host string }

func (e *SocketHostError) Error() string {
	return fmt.Sprintf("agent socket host %q does not encode an absolute socket path", e.Host)
}

// socketFromHost is socketHost's inverse: the socket path a host name stands for, or false for any other host.
func socketFromHost(host string) (string, bool, error) {
	enc, ok := strings.CutSuffix(host, socketHostSuffix)
	if !ok {
		return "", false, nil
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(enc, ".", ""))
	path := string(raw)
	if err != nil || !strings.HasPrefix(path, "/") || len(path) > maxSocketPath || strings.IndexByte(path, 0) >= 0 {
		return "", true, &SocketHostError{Host: host}
	}
	return path, true, nil
}

// SocketTransport is an HTTP transport that also reaches agents over their UNIX sockets with keep-alive: each
// socket is a host of its own in the transport's pool (socketHost), so a connection opened to one agent's socket
// (the gateway's readiness probe) is kept and serves the next request to that agent (the first exec after a warm
// claim), as TCP agents' connections are. BaseURL gives such a client the socket's host instead of a client per call.
type SocketTransport struct {
	*http.Transport
	// Observe, when set (before the transport is used), sees every request as it starts; the function it returns,
	// if any, is called once when that request is over: its response body read to the end or closed, the round
	// trip failed, or the connection was switched to another protocol (101). The gateway learns from it when a
	// claimed sandbox's first call is done, without wrapping the transport (which would hide it from BaseURL).
	Observe func(*http.Request) (done func())
}

// RoundTrip sends req on the embedded transport, reporting it to Observe. A request a redirect made, or one not
// pinned to the agent its URL names (PinAgent), is refused before anything is dialled or sent.
func (t *SocketTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkRequest(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if t.Observe == nil {
		return t.Transport.RoundTrip(req)
	}
	done := t.Observe(req)
	resp, err := t.Transport.RoundTrip(req)
	if done == nil {
		return resp, err
	}
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil {
		// A switched connection's body is the connection itself (an io.ReadWriteCloser): it is not wrapped.
		done()
		return resp, err
	}
	resp.Body = &observedBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

// observedBody calls done once, at the body's end or close, whichever comes first.
type observedBody struct {
	io.ReadCloser
	done func()
	once sync.Once
}

func (b *observedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *observedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// NewSocketTransport makes tr dial agents, over their sockets or TCP (its own DialContext, or a default dialer,
// dials TCP agents), and nothing else: every dial goes to the agent its request was pinned to (PinAgent, pin.go),
// never to the host a URL names. tr is changed in place and must not be in use yet. Its proxy is cleared: a
// socket's host must reach the dialer, never an HTTP proxy.
func NewSocketTransport(tr *http.Transport) *SocketTransport {
	tr.Proxy = nil
	next := tr.DialContext
	if next == nil {
		next = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
		return dialPinned(ctx, addr, next)
	}
	return &SocketTransport{Transport: tr}
}

// dialsAgentSockets marks a transport whose pool keeps socket connections.
func (*SocketTransport) dialsAgentSockets() {}

// BaseURL is the base URL and HTTP client to reach the agent at addr (host:port or a UNIX address). For a TCP
// address both are returned unchanged (httpClient may be nil). For a socket and a client on a SocketTransport, the
// client is returned unchanged with the socket's own host, so its connections are pooled and kept. For a socket
// and any other client, the client is a copy of httpClient (its timeout kept) whose transport
// dials the socket and that follows no redirect; keep-alives are off, so a client made per call leaves no idle
// connection behind.
func BaseURL(addr string, httpClient *http.Client) (string, *http.Client) {
	path, ok := SocketPath(addr)
	if !ok {
		return "http://" + addr, httpClient
	}
	if httpClient != nil {
		if _, pooled := httpClient.Transport.(interface{ dialsAgentSockets() }); pooled {
			return "http://" + socketHost(path), httpClient
		}
	}
	c := http.Client{}
	if httpClient != nil {
		c = *httpClient
	}
	var tr *http.Transport
	if base, ok := c.Transport.(*http.Transport); ok && base != nil {
		tr = base.Clone()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr.Proxy = nil
	tr.DisableKeepAlives = true
	c.CheckRedirect = NoRedirect // the transport dials the socket whatever the URL says: a redirect must not reach it
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	}
	c.Transport = tr
	return unixBaseURL, &c
}

// NewClientFor returns a client for the agent at addr (host:port or a UNIX address, see BaseURL).
func NewClientFor(addr, token string, httpClient *http.Client) *Client {
	base, hc := BaseURL(addr, httpClient)
	return NewClient(base, token, hc)
}
