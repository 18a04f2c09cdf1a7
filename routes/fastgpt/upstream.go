package fastgpt

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

const (
	channelFS       = "fs"
	channelTerminal = "terminal"
)

var (
	errAgentTokenMissing = errors.New("agent token is missing")
	errEndpointMissing   = errors.New("sandbox endpoint is missing")
	errEndpointInvalid   = errors.New("invalid sandbox endpoint")
)

// sandboxBase normalizes a sandbox_url as the original does: trimmed, without trailing slashes, http:// when it has
// no scheme, and a loopback host replaced by rewriteHost (keeping the port) so a proxy in a container can reach a
// sandbox published on the Docker host.
func sandboxBase(raw, rewriteHost string) (*url.URL, error) {
	s := strings.TrimRight(strings.TrimSpace(raw), "/")
	if s == "" {
		return nil, errEndpointMissing
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, errEndpointInvalid
	}
	if rewriteHost != "" && isLoopbackName(u.Hostname()) {
		host := rewriteHost
		if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
			host = "[" + host + "]"
		}
		if port := u.Port(); port != "" {
			host = net.JoinHostPort(strings.Trim(host, "[]"), port)
		}
		u.Host = host
	}
	return u, nil
}

func isLoopbackName(host string) bool {
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// agentWSURL is the IDE agent's WebSocket URL for channel. token and permission are appended verbatim, without
// URL-encoding, exactly as the original builds it.
func agentWSURL(addr *sandboxAddress, rewriteHost, channel, permission string) (string, error) {
	if addr.AgentToken == "" {
		return "", errAgentTokenMissing
	}
	u, err := sandboxBase(addr.SandboxURL, rewriteHost)
	if err != nil {
		return "", err
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", errEndpointInvalid
	}
	return u.String() + "/" + channel + "?token=" + addr.AgentToken + "&permission=" + permission, nil
}

// agentPreviewURL is the IDE agent's preview URL for a validated list of decoded path segments.
func agentPreviewURL(addr *sandboxAddress, rewriteHost string, segments []string) (string, error) {
	u, err := sandboxBase(addr.SandboxURL, rewriteHost)
	if err != nil {
		return "", err
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return "", errEndpointInvalid
	}
	escaped := make([]string, len(segments))
	for i, s := range segments {
		escaped[i] = url.PathEscape(s)
	}
	return u.String() + "/preview/" + strings.Join(escaped, "/"), nil
}

// redactURL keeps only what a log may show of an upstream URL: scheme, host and path.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable url>"
	}
	q := u.Query()
	for _, k := range []string{"token", "access_token", "ticket"} {
		if q.Has(k) {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	u.User = nil
	return fmt.Sprint(u)
}
