package egress

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// The address policy: the one check every outbound dial the gateway makes for a tenant goes through (URL imports
// and their redirects, the egress proxy, FastGPT previews). It runs in net.Dialer's Control, on the address actually
// being connected after DNS, so no spelling of a URL, no DNS answer and no redirect can get past it.
//
// An address is normalised before it is classified, because the kernel routes what it means, not how it is spelt:
//   - an IPv6 zone ("::1%lo", "fe80::1%eth0") is dropped: a zoned address matches no prefix in net/netip, which is
//     how "http://[::1%25lo]:port/" used to reach the gateway's loopback;
//   - IPv4-mapped addresses (::ffff:a.b.c.d) become the IPv4 address;
//   - translation prefixes that carry an IPv4 address (NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32, IPv4-translated
//     ::ffff:0:0:0/96 and the deprecated IPv4-compatible ::/96) are judged by the IPv4 address they embed as well as by themselves, so a
//     NAT64 gateway or 6to4 relay cannot be used to reach a blocked IPv4 range;
//   - the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is refused outright: its embedding is site-defined.

// AddrRules says which classes of address a dial may reach beyond the public internet. The zero value allows public
// addresses only.
type AddrRules struct {
	// Loopback allows loopback addresses (127/8, ::1). Only for dials to operator-given addresses, never for a
	// tenant-given URL.
	Loopback bool
	// Private reports whether a private address (RFC 1918, CGNAT, ULA, benchmarking, site-local) may be dialled;
	// nil refuses every private address.
	Private func(netip.Addr) bool
}

// Never reachable, whatever the rules: link-local (cloud metadata lives there), unspecified ("0.0.0.0" and "::"
// connect to the local host), multicast, broadcast, reserved ranges, IETF protocol assignments (192.0.0.192 is a
// metadata address too), the discard prefix and the cloud providers' metadata addresses outside link-local.
// Documentation ranges are not listed: some test networks use them, and they are ordinary routed addresses.
var neverDialled = mustPrefixes(
	"0.0.0.0/8", "169.254.0.0/16", "192.0.0.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
	"100.100.100.200/32", "::/128", "fe80::/10", "ff00::/8", "100::/64", "fd00:ec2::254/128", "64:ff9b:1::/48",
)

var (
	loopbackPrefixes = mustPrefixes("127.0.0.0/8", "::1/128")
	metadataAddrs    = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("100.100.100.200")}
	privatePrefixes = mustPrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.18.0.0/15",
		"fc00::/7", "fec0::/10")

	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	v4compat  = netip.MustParsePrefix("::/96")
	v4transl  = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// NormaliseAddr returns the address a dial to ip really reaches (zone dropped, IPv4-mapped and IPv4-translated
// addresses unmapped) and the IPv4 addresses it embeds through a translation prefix.
func NormaliseAddr(ip netip.Addr) (netip.Addr, []netip.Addr) {
	ip = ip.WithZone("").Unmap()
	if !ip.Is6() {
		return ip, nil
	}
	b := ip.As16()
	v4 := func(off int) netip.Addr { return netip.AddrFrom4([4]byte(b[off : off+4])) }
	switch {
	case v4transl.Contains(ip), nat64.Contains(ip):
		return ip, []netip.Addr{v4(12)}
	case sixToFour.Contains(ip):
		return ip, []netip.Addr{v4(2)}
	case teredo.Contains(ip):
		// RFC 4380: the server's address in bits 32-63, the client's (bit-inverted) in bits 96-127.
		var client [4]byte
		binary.BigEndian.PutUint32(client[:], ^binary.BigEndian.Uint32(b[12:16]))
		return ip, []netip.Addr{v4(4), netip.AddrFrom4(client)}
	case v4compat.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
		return ip, []netip.Addr{v4(12)}
	}
	return ip, nil
}

// Check returns why ip must not be dialled (a *RefusedError), or nil.
func (r AddrRules) Check(ip netip.Addr) error {
	if !ip.IsValid() {
		return &RefusedError{Host: "invalid address", Reason: "not an IP address"}
	}
	n, embedded := NormaliseAddr(ip)
	if why := r.refuses(n); why != "" {
		return &RefusedError{Host: ip.String(), Reason: why}
	}
	for _, e := range embedded {
		if why := r.refuses(e); why != "" {
			return &RefusedError{Host: ip.String(), Reason: fmt.Sprintf("it embeds %s: %s", e, why)}
		}
	}
	if ip.Zone() != "" {
		// Zones only matter for link-local and multicast, both refused above; a zone on anything else is a trick.
		return &RefusedError{Host: ip.String(), Reason: "an address with an IPv6 zone is never dialled for a tenant"}
	}
	return nil
}

func (r AddrRules) refuses(ip netip.Addr) string {
	for _, m := range metadataAddrs {
		if ip == m {
			return fmt.Sprintf("%s is a cloud metadata address", ip)
		}
	}
	for _, pf := range neverDialled {
		if pf.Contains(ip) {
			return fmt.Sprintf("%s is in %s, which is never dialled for a tenant", ip, pf)
		}
	}
	for _, pf := range loopbackPrefixes {
		if pf.Contains(ip) && !r.Loopback {
			return fmt.Sprintf("%s is a loopback address", ip)
		}
	}
	for _, pf := range privatePrefixes {
		if pf.Contains(ip) && (r.Private == nil || !r.Private(ip)) {
			return fmt.Sprintf("%s is a private address not named on the allow-list", ip)
		}
	}
	return ""
}

// Control is a net.Dialer Control function enforcing the rules on the address being connected.
func (r AddrRules) Control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return &RefusedError{Host: address, Reason: "network " + network + " is never dialled for a tenant"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Host: address, Reason: "unparseable address"}
	}
	return r.Check(ap.Addr())
}

// Dialer returns a dialer that applies the rules to every address it connects, after resolution.
func (r AddrRules) Dialer(timeout time.Duration, resolver *net.Resolver) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Resolver: resolver, Control: r.Control}
}

// DialContext is a Transport.DialContext applying the rules; timeout bounds each connect.
func (r AddrRules) DialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return r.Dialer(timeout, nil).DialContext
}
