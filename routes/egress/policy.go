// Package egress is an allow-list forward proxy for sandboxes: CONNECT tunnels and absolute-form HTTP requests,
// each checked against the sandbox's allow-list by name and again by the address actually dialled, so DNS cannot
// smuggle a private or metadata address past the list. Refusals are logged with the sandbox's id.
package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Policy is what one sandbox may reach. Allow entries are host names ("pypi.org"), wildcard domains
// ("*.example.com", which matches subdomains only), IP addresses or CIDR prefixes. An empty list refuses
// everything.
type Policy struct {
	Allow []string `json:"allow,omitempty"`
	// Deny names (host names or *.domains) that are refused before Allow is read: a tenant's own rules
	// (OpenSandbox's networkPolicy) beside the operator's list.
	Deny []string `json:"deny,omitempty"`
	// AllowAnyName admits every host not denied; addresses still pass the address policy, so it never opens a
	// private, loopback or metadata address.
	AllowAnyName bool `json:"allow_any_name,omitempty"`
	// Within, when set, must admit the host too: a sandbox's own policy is narrowed by its profile's list, never
	// widened.
	Within *Policy `json:"-"`
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Validate checks every entry.
func (p Policy) Validate() error {
	for _, d := range p.Deny {
		d = strings.ToLower(strings.TrimSpace(d))
		if !validName(strings.TrimPrefix(d, "*.")) {
			return fmt.Errorf("egress deny %q: a host name or *.domain", d)
		}
	}
	if p.Within != nil {
		if err := p.Within.Validate(); err != nil {
			return err
		}
	}
	for _, a := range p.Allow {
		a = strings.ToLower(strings.TrimSpace(a))
		switch {
		case a == "":
			return fmt.Errorf("egress allow: empty entry")
		case strings.Contains(a, "/"):
			if _, err := netip.ParsePrefix(a); err != nil {
				return fmt.Errorf("egress allow %q: %w", a, err)
			}
		case strings.HasPrefix(a, "*."):
			if !validName(a[2:]) {
				return fmt.Errorf("egress allow %q: not a domain", a)
			}
		default:
			if _, err := netip.ParseAddr(a); err != nil && !validName(a) {
				return fmt.Errorf("egress allow %q: not a host name, address or prefix", a)
			}
		}
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// AllowsHost reports whether host (a name or an address literal, no port) is on the list, and why not.
func (p Policy) AllowsHost(host string) (bool, string) {
	if p.Within != nil {
		if ok, why := p.Within.AllowsHost(host); !ok {
			return false, why
		}
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.allowsLiteral(ip)
	}
	if matchName(p.Deny, host) {
		return false, "host denied by the sandbox's egress policy"
	}
	if p.AllowAnyName {
		return true, ""
	}
	for _, a := range p.Allow {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == host || (strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:])) {
			return true, ""
		}
	}
	return false, "host not on the sandbox's egress allow-list"
}

func (p Policy) allowsLiteral(ip netip.Addr) (bool, string) {
	if reason := blockedAlways(ip); reason != "" {
		return false, reason
	}
	if n, _ := NormaliseAddr(ip); p.namesAddr(n) {
		return true, ""
	}
	if p.AllowAnyName && (p.Within != nil || (AddrRules{}).Check(ip) == nil) {
		// Any address: a public one, or (inside a profile's list) whatever that list admits, so a tenant's
		// default-allow policy keeps the private destinations the operator named.
		return true, ""
	}
	return false, "address not on the sandbox's egress allow-list"
}

// matchName reports whether host is one of names or under one of its *.domains.
func matchName(names []string, host string) bool {
	for _, a := range names {
		a = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a)), ".")
		if a == host || (strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:])) {
			return true
		}
	}
	return false
}

// namesAddr reports whether an entry is ip itself or a prefix holding it.
func (p Policy) namesAddr(ip netip.Addr) bool {
	ip, _ = NormaliseAddr(ip)
	for _, a := range p.Allow {
		a = strings.TrimSpace(a)
		if pf, err := netip.ParsePrefix(a); err == nil && pf.Contains(ip) {
			return true
		}
		if x, err := netip.ParseAddr(a); err == nil && x.Unmap() == ip {
			return true
		}
	}
	return false
}

// AllowsDial is the check on the address about to be dialled (after DNS), through the address policy
// (addrpolicy.go): never loopback, link-local, metadata and the like, and a private address only if the list names it.
func (p Policy) AllowsDial(ip netip.Addr) (bool, string) {
	if err := p.Rules().Check(ip); err != nil {
		return false, err.(*RefusedError).Reason
	}
	return true, ""
}

// Rules is the address policy of the sandbox's dials: a private address only where every policy in the chain
// names it.
func (p Policy) Rules() AddrRules {
	return AddrRules{Private: func(ip netip.Addr) bool {
		own := p.namesAddr(ip) || (p.AllowAnyName && p.Within != nil)
		return own && (p.Within == nil || p.Within.Rules().Private(ip))
	}}
}

// blockedAlways is why ip is refused whatever the list says ("" if it is not).
func blockedAlways(ip netip.Addr) string {
	if err := (AddrRules{Private: func(netip.Addr) bool { return true }}).Check(ip); err != nil {
		return err.(*RefusedError).Reason
	}
	return ""
}
