// Package hostrewrite replaces loopback hosts in upstream addresses with a configured host, with the semantics of
// FastGPT's AGENT_SANDBOX_PROXY_REWRITE_HOST: a gateway running in a container cannot reach a sandbox port published
// on the Docker host's 127.0.0.1, so "localhost", "127.0.0.1" and "::1" become e.g. "host.docker.internal", keeping
// the port. An empty replacement disables the rewrite.
package hostrewrite

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// isLoopbackName reports whether host is one of the names the rewrite replaces: "localhost" (any case),
// "127.0.0.1" or "::1" (with or without brackets). Other loopback addresses are left alone, as FastGPT does.
func isLoopbackName(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || host == "127.0.0.1" || host == "::1"
}

// Addr rewrites a host:port dial address. Addresses without a port are treated as a bare host.
func Addr(addr, replacement string) string {
	replacement = strings.TrimSpace(replacement)
	if replacement == "" {
		return addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if isLoopbackName(addr) {
			return bareHost(replacement)
		}
		return addr
	}
	if !isLoopbackName(host) {
		return addr
	}
	return net.JoinHostPort(bareHost(replacement), port)
}

// URL rewrites the host of an absolute URL. A value without "://" is read as http://, as FastGPT reads sandbox
// URLs; the result always carries its scheme.
func URL(raw, replacement string) (string, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing upstream URL: %w", err)
	}
	if u.Host == "" {
		return "", fmt.Errorf("upstream URL %q has no host", raw)
	}
	replacement = strings.TrimSpace(replacement)
	if replacement == "" || !isLoopbackName(u.Hostname()) {
		return u.String(), nil
	}
	if port := u.Port(); port != "" {
		u.Host = net.JoinHostPort(bareHost(replacement), port)
	} else if strings.Contains(bareHost(replacement), ":") {
		u.Host = "[" + bareHost(replacement) + "]"
	} else {
		u.Host = replacement
	}
	return u.String(), nil
}

func bareHost(h string) string {
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}
