package agentapi

import (
	"context"
	"net"
	"net/http"
	"strings"
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

// unixBaseURL is the base URL of an agent reached over its socket; the host part is never resolved.
const unixBaseURL = "http://sandbox"

// BaseURL is the base URL and HTTP client to reach the agent at addr (host:port or a UNIX address). For a TCP
// address both are returned unchanged (httpClient may be nil). For a socket the client is a copy of httpClient
// (its timeout and redirect policy kept) whose transport dials the socket; keep-alives are off, so a client made
// per call leaves no idle connection behind.
func BaseURL(addr string, httpClient *http.Client) (string, *http.Client) {
	path, ok := SocketPath(addr)
	if !ok {
		return "http://" + addr, httpClient
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
