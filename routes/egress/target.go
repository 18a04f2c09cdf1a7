package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ConnectTarget reads the authority of a CONNECT request (host:port, an IPv6 literal in brackets), which the
// sandbox writes. host comes back as the policy and the dial read it: an address literal without brackets, or a
// host name in lower case without a trailing dot. Refused: no port or a port outside 1-65535, an empty host, a
// zoned address, a name that is not a DNS name, and a name whose last label is all digits (a resolver may read
// "127.1" as an address; an address must be spelt as one).
func ConnectTarget(authority string) (host string, port uint16, err error) {
	if len(authority) > maxConnectTarget {
		return "", 0, fmt.Errorf("CONNECT target longer than %d bytes", maxConnectTarget)
	}
	h, p, err := net.SplitHostPort(authority)
	if err != nil {
		return "", 0, fmt.Errorf("CONNECT needs host:port: %q", authority)
	}
	if p == "" || len(p) > 5 || strings.TrimLeft(p, "0123456789") != "" {
		return "", 0, fmt.Errorf("CONNECT port %q: not a number", p)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("CONNECT port %q: not from 1 to 65535", p)
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", 0, fmt.Errorf("CONNECT target %q: a zoned address", h)
		}
		if ip.Is6() != strings.HasPrefix(authority, "[") {
			return "", 0, fmt.Errorf("CONNECT target %q: brackets hold an IPv6 address, and only one", authority)
		}
		return ip.String(), uint16(n), nil
	}
	if strings.HasPrefix(authority, "[") {
		return "", 0, fmt.Errorf("CONNECT target %q: brackets hold an IPv6 address", authority)
	}
	name := strings.TrimSuffix(strings.ToLower(h), ".")
	if !validName(name) {
		return "", 0, fmt.Errorf("CONNECT target %q: not a host name or address", h)
	}
	if last := name[strings.LastIndexByte(name, '.')+1:]; strings.TrimLeft(last, "0123456789") == "" {
		return "", 0, fmt.Errorf("CONNECT target %q: a name ending in a number is not an address", h)
	}
	return name, uint16(n), nil
}
