package agentapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
)

// A sandbox's agent is hostile: code in the sandbox can replace it (for network none, remove the socket and bind
// its own) and answer anything. Two rules keep its answers from steering the gateway, which runs on the host:
//
//   - no agent client follows a redirect (NoRedirect on every client, and SocketTransport refuses a request a
//     redirect made, whatever the client's policy); a 3xx answer is a bad_reply error;
//   - a SocketTransport dials only the agent address its request was pinned to (PinAgent; the Client pins every
//     request to the address it was made for, which the Manager resolved), never the host a URL names: a request
//     whose URL host is not the pinned agent's, or that carries no pin, is refused before any dial.
//
// So a URL the agent returns (Location, or anything else) cannot make the gateway reach the Docker socket, Caddy's
// admin endpoint, cloud metadata or another sandbox.

// NoRedirect is the CheckRedirect of every agent client: the redirect is returned as the answer (and Client.Do
// turns it into a bad_reply error), never followed.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// ErrRedirect is matched (errors.Is) by the error for an agent that answered a redirect.
var ErrRedirect = errors.New("the sandbox's agent answered a redirect")

// ErrNotPinned is matched (errors.Is) by the error for a request a SocketTransport refused because it is not
// pinned to the agent its URL names.
var ErrNotPinned = errors.New("agent request not pinned to its sandbox's agent")

// agentPin is the one agent a request may reach: the host:port its URL must name (the transport's pool key) and
// what to dial for it.
type agentPin struct {
	hostPort string // the URL host with its port, as the transport hands it to DialContext
	socket   string // the UNIX socket path to dial, or "" to dial hostPort over TCP
	err      error  // the address could not name an agent: every request fails with it
}

type pinKey struct{}

// PinAgent returns ctx pinned to the agent at addr (host:port or a UNIX address, as Target.Addr): a
// SocketTransport sends a request with this context only to that agent's URL host, and dials only addr for it.
// Client pins its requests itself; only requests built by hand (readiness probes) need this.
func PinAgent(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, pinKey{}, pinOf(addr))
}

func pinOf(addr string) agentPin {
	if path, ok := SocketPath(addr); ok {
		if len(path) > maxSocketPath {
			return agentPin{err: &SocketHostError{Host: socketHost(path)}}
		}
		return agentPin{hostPort: socketHost(path) + ":80", socket: path}
	}
	return agentPin{hostPort: withPort(addr)}
}

// pinOfBase is the pin of a Client's base URL, which BaseURL made from the address the Manager resolved: a
// socket's host name stands for that socket, any other host for itself.
func pinOfBase(base string) agentPin {
	u, err := url.Parse(base)
	if err != nil {
		return agentPin{err: err}
	}
	path, isSocket, err := socketFromHost(u.Hostname())
	switch {
	case err != nil:
		return agentPin{err: err}
	case isSocket:
		return agentPin{hostPort: withPort(u.Host), socket: path}
	}
	return agentPin{hostPort: withPort(u.Host)}
}

// withPort adds HTTP's default port to a host without one.
func withPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(host, "80")
}

func pinFrom(ctx context.Context) (agentPin, bool) {
	p, ok := ctx.Value(pinKey{}).(agentPin)
	return p, ok
}

// checkRequest refuses what a SocketTransport never sends: a request a redirect made, one without a pin, and one
// whose URL names another host than its pin.
func checkRequest(req *http.Request) error {
	if req.Response != nil {
		return redirectError(req.Response.Status, req.URL)
	}
	p, ok := pinFrom(req.Context())
	if !ok {
		return badReply(ErrNotPinned, "a request to %s names no sandbox's agent; the gateway sends none", req.URL.Host)
	}
	if p.err != nil {
		return p.err
	}
	if withPort(req.URL.Host) != p.hostPort {
		return badReply(ErrNotPinned, "a request to %s is not for its sandbox's agent; the gateway sends none", req.URL.Host)
	}
	return nil
}

// dialPinned is a SocketTransport's dial: the pinned agent's socket or address, and only when addr (the URL's host,
// the pool's key) is that agent's.
func dialPinned(ctx context.Context, addr string, tcp func(context.Context, string, string) (net.Conn, error)) (net.Conn, error) {
	p, ok := pinFrom(ctx)
	if !ok || p.err != nil || addr != p.hostPort {
		return nil, badReply(ErrNotPinned, "refusing to dial %s: not the sandbox's agent", addr)
	}
	if p.socket != "" {
		var d net.Dialer
		return d.DialContext(ctx, "unix", p.socket)
	}
	return tcp(ctx, "tcp", p.hostPort)
}

// redirectError is the bad_reply error of a redirect answer.
func redirectError(status string, to *url.URL) error {
	where := ""
	if to != nil {
		where = " to " + to.Redacted()
		if len(where) > 200 {
			where = where[:200]
		}
	}
	return badReply(ErrRedirect, "the sandbox's agent answered %s%s; the gateway follows no redirect from a sandbox", status, where)
}

// badReply is a bad_reply *Error that also matches sentinel.
func badReply(sentinel error, format string, args ...any) error {
	return errors.Join(Errorf(CodeBadReply, format, args...), sentinel)
}
