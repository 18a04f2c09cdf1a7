// Package sandboxroute maps browser requests onto sandboxes: which sandbox and route kind a request is for (path
// form /sandboxes/{id}/{kind}/... or subdomain form {port}-{id}.{base} / {id}.{base}), whether its ticket or session
// lets it in, what agent path it goes to, and the typed errors a browser gets when the sandbox cannot be reached.
package sandboxroute

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/tickets"
)

// PathPrefix starts every path-form sandbox route (defined with the ticket URLs that point at them).
const PathPrefix = tickets.PathPrefix

// Address says which sandbox and route a browser request is for.
type Address struct {
	SandboxID string
	Kind      tickets.Kind
	// Port is the app port named by the request (path segment or subdomain); 0 means the profile's app port.
	Port int
	// PTY is the PTY session a pty route names.
	PTY string
	// Prefix is the external path that stands for the kind's root at the agent, e.g. "/sandboxes/ID/cdp" or
	// "/sandboxes/ID/app/3000"; empty in subdomain form. It is what X-Forwarded-Prefix carries.
	Prefix string
	// Rest is the escaped path after Prefix: empty or starting with "/".
	Rest string
	// Subdomain is true for the subdomain form.
	Subdomain bool
}

// CookiePath is the path a session cookie for this address is scoped to: the kind's root of this one sandbox (all
// its ports, for apps), or the whole host in subdomain form.
func (a Address) CookiePath() string {
	if a.Subdomain {
		return "/"
	}
	return PathPrefix + a.SandboxID + "/" + string(a.Kind)
}

// ErrNotSandboxRoute means the request names no sandbox route.
var ErrNotSandboxRoute = errors.New("not a sandbox route")

// sandboxIDPattern is what a sandbox id may look like in a URL: a DNS label, so the same id works in both forms.
var sandboxIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,62}$`)

// ValidSandboxID reports whether id can name a sandbox in a route.
func ValidSandboxID(id string) bool { return sandboxIDPattern.MatchString(id) }

// ParsePath reads a path-form address from an escaped request path:
//
//	/sandboxes/{id}/app[/{port}]/...   /sandboxes/{id}/vnc/...   /sandboxes/{id}/cdp[/...]
//	/sandboxes/{id}/terminal/...       /sandboxes/{id}/pty/{pty}[/ws]   /sandboxes/{id}/files[/]
//
// An app path whose first segment is a number from 1 to 65535 names the port; others use the profile's app port.
func ParsePath(escapedPath string) (Address, error) {
	rest, ok := strings.CutPrefix(escapedPath, PathPrefix)
	if !ok {
		return Address{}, ErrNotSandboxRoute
	}
	id, rest, _ := strings.Cut(rest, "/")
	kindName, tail, hasTail := strings.Cut(rest, "/")
	if !ValidSandboxID(id) || kindName == "" {
		return Address{}, ErrNotSandboxRoute
	}
	kind, err := tickets.ParseKind(kindName)
	if err != nil {
		return Address{}, fmt.Errorf("%w: %v", ErrNotSandboxRoute, err)
	}
	a := Address{SandboxID: id, Kind: kind, Prefix: PathPrefix + id + "/" + kindName}
	if hasTail {
		a.Rest = "/" + tail
	}
	switch kind {
	case tickets.KindApp:
		seg, after, more := strings.Cut(tail, "/")
		if port, ok := parsePort(seg); ok && hasTail {
			a.Port = port
			a.Prefix += "/" + seg
			a.Rest = ""
			if more {
				a.Rest = "/" + after
			}
		}
	case tickets.KindPTY:
		seg, after, _ := strings.Cut(tail, "/")
		if !ValidSandboxID(seg) || (after != "" && after != "ws") {
			return Address{}, fmt.Errorf("%w: want /sandboxes/{id}/pty/{pty}[/ws]", ErrNotSandboxRoute)
		}
		a.PTY = seg
	}
	return a, nil
}

// ParseHost reads a subdomain-form address, {port}-{id}.{base} or {id}.{base}, for one of the base domains. The
// request's port, if any, is ignored. Subdomain routes are always app routes.
func ParseHost(host string, baseDomains []string) (Address, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, base := range baseDomains {
		base = strings.ToLower(strings.Trim(base, "."))
		label, ok := strings.CutSuffix(host, "."+base)
		if !ok || base == "" || strings.Contains(label, ".") {
			continue
		}
		a := Address{Kind: tickets.KindApp, Subdomain: true}
		if p, id, found := strings.Cut(label, "-"); found {
			if port, ok := parsePort(p); ok && ValidSandboxID(id) {
				a.Port, a.SandboxID = port, id
				return a, true
			}
		}
		if ValidSandboxID(label) {
			a.SandboxID = label
			return a, true
		}
	}
	return Address{}, false
}

// fromRequest reads the address of a request: the subdomain form when the host is under a base domain, the path
// form otherwise. In subdomain form Rest is the whole escaped path.
func fromRequest(host, escapedPath string, baseDomains []string) (Address, error) {
	if a, ok := ParseHost(host, baseDomains); ok {
		a.Rest = escapedPath
		return a, nil
	}
	return ParsePath(escapedPath)
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}
