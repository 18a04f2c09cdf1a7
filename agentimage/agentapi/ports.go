package agentapi

import (
	"context"
	"net/http"
)

// Scopes of a listening socket: where a connection to it may come from.
const (
	// ScopeAll is a wildcard bind (0.0.0.0 or ::): every interface, the sandbox network included.
	ScopeAll = "all"
	// ScopeLoopback is a loopback bind (127.0.0.0/8 or ::1): only code inside the sandbox and the agent's port
	// proxy reach it.
	ScopeLoopback = "loopback"
	// ScopeInterface is a bind to one interface's own address.
	ScopeInterface = "interface"
)

// MaxListeningPorts caps how many sockets GET /v1/ports lists; a sandbox may open many more, and then the reply
// says Truncated.
const MaxListeningPorts = 4096

// ListeningPort is one TCP socket in LISTEN state inside the sandbox's network namespace.
type ListeningPort struct {
	Port int `json:"port"`
	// Address is the bound address as the kernel reports it, IPv4-mapped IPv6 unmapped: "0.0.0.0", "::",
	// "127.0.0.1", "::1", "172.18.0.2".
	Address string `json:"address"`
	// Scope is ScopeAll, ScopeLoopback or ScopeInterface.
	Scope string `json:"scope"`
	// Reserved says why the agent's port proxy refuses this port (its own port, Chromium's DevTools, the VNC
	// server: they have routes of their own); empty for every other port.
	Reserved string `json:"reserved,omitempty"`
}

// Proxied reports whether /proxy/{port}/ reaches this socket: the proxy dials 127.0.0.1:{port}, which a wildcard
// bind (IPv4, or IPv6 in its default dual-stack mode) and a bind to 127.0.0.1 accept, and it refuses reserved
// ports.
func (p ListeningPort) Proxied() bool {
	if p.Reserved != "" || p.Port < 1 || p.Port > 65535 {
		return false
	}
	return p.Scope == ScopeAll || p.Address == "127.0.0.1"
}

// ListeningPorts is the body of GET /v1/ports: the sandbox's listening TCP sockets, sorted by port then address.
type ListeningPorts struct {
	Ports []ListeningPort `json:"ports"`
	// Truncated is set when more than MaxListeningPorts sockets listen; which of them are listed is then
	// unspecified.
	Truncated bool `json:"truncated,omitempty"`
}

// Ports lists the TCP ports listening inside the sandbox (GET /v1/ports).
func (c *Client) Ports(ctx context.Context) (ListeningPorts, error) {
	var res ListeningPorts
	return res, c.doJSON(ctx, http.MethodGet, "/v1/ports", nil, &res)
}
