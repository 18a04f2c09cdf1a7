package egress

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestConnectTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port uint16
	}{
		{"pypi.org:443", "pypi.org", 443}, {"PyPI.org.:443", "pypi.org", 443}, {"10.9.8.7:22", "10.9.8.7", 22},
		{"[2001:db8::1]:443", "2001:db8::1", 443}, {"[::ffff:10.0.0.1]:80", "::ffff:10.0.0.1", 80},
		{"a_b.example.com:65535", "a_b.example.com", 65535}, {"x:1", "x", 1},
		// Refused: no port, bad ports, empty or odd hosts, zones, numeric last labels, misplaced brackets.
		{"pypi.org", "", 0}, {"pypi.org:", "", 0}, {"pypi.org:0", "", 0}, {"pypi.org:65536", "", 0},
		{"pypi.org:+443", "", 0}, {"pypi.org:0443x", "", 0}, {"pypi.org:000443", "", 0}, {":443", "", 0},
		{"[fe80::1%eth0]:443", "", 0}, {"[::1%25lo]:80", "", 0}, {"127.1:80", "", 0}, {"0x7f.1:80", "", 0},
		{"a.b.123:80", "", 0}, {"[1.2.3.4]:80", "", 0}, {"[pypi.org]:443", "", 0}, {"a b:80", "", 0},
		{"::1:80", "", 0}, {"pypi.org:443/x", "", 0}, {strings.Repeat("a", 300) + ":80", "", 0},
	} {
		host, port, err := ConnectTarget(tc.in)
		if tc.host == "" {
			if err == nil {
				t.Errorf("%q accepted as %q %d", tc.in, host, port)
			}
			continue
		}
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("%q: %q %d %v, want %q %d", tc.in, host, port, err, tc.host, tc.port)
		}
	}
}

// FuzzConnectTarget: whatever authority a sandbox puts in a CONNECT, the parse never panics; an accepted one has a
// port from 1 to 65535 and a host that is an unzoned address or a DNS name not ending in a number, which parses
// back to itself; and the policy never admits a loopback, link-local or private literal it does not name.
func FuzzConnectTarget(f *testing.F) {
	for _, s := range []string{"pypi.org:443", "PyPI.org.:443", "[2001:db8::1]:443", "10.9.8.7:22", "127.0.0.1:22",
		"[::1]:443", "[fe80::1%25eth0]:443", "169.254.169.254:80", "127.1:80", "pypi.org:0", "pypi.org:65536", ":443",
		"[::ffff:127.0.0.1]:80", "[64:ff9b::a9fe:a9fe]:80", "localhost:80", "a..b:1", "xn--bcher-kva.example:443"} {
		f.Add(s)
	}
	pol := Policy{Allow: []string{"pypi.org", "*.example.com", "10.9.8.7"}, AllowAnyName: false}
	anyName := Policy{AllowAnyName: true}
	f.Fuzz(func(t *testing.T, s string) {
		host, port, err := ConnectTarget(s)
		if err != nil {
			return
		}
		if port < 1 || host == "" || len(host) > 253 {
			t.Fatalf("%q gave %q %d", s, host, port)
		}
		back := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if h2, p2, err := ConnectTarget(back); err != nil || h2 != host || p2 != port {
			t.Fatalf("%q gave %q, which parses to %q %d %v", s, back, h2, p2, err)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			if ip.Zone() != "" {
				t.Fatalf("%q: zoned %s accepted", s, ip)
			}
			n, _ := NormaliseAddr(ip)
			for _, p := range []Policy{pol, anyName} {
				if ok, _ := p.AllowsHost(host); ok && (n.IsLoopback() || n.IsLinkLocalUnicast() || n.IsUnspecified() ||
					n.IsPrivate() && !p.namesAddr(n)) {
					t.Fatalf("%q: %s admitted by %+v", s, host, p)
				}
			}
			return
		}
		last := host[strings.LastIndexByte(host, '.')+1:]
		if !validName(host) || host != strings.ToLower(host) || strings.TrimLeft(last, "0123456789") == "" {
			t.Fatalf("%q: name %q accepted", s, host)
		}
		for _, p := range []Policy{pol, anyName} {
			_, _ = p.AllowsHost(host)
		}
	})
}
