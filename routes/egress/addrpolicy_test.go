package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestAddrRulesSpellings: every spelling of a blocked address is refused, by itself and through the translation
// prefixes that embed an IPv4 address.
func TestAddrRulesSpellings(t *testing.T) {
	public := AddrRules{}
	withPrivate := AddrRules{Private: func(netip.Addr) bool { return true }}
	operator := AddrRules{Loopback: true, Private: func(netip.Addr) bool { return true }}
	for _, tc := range []struct {
		addr                   string
		public, private, local bool // allowed under public, withPrivate, operator
	}{
		{"93.184.216.34", true, true, true},
		{"2606:2800:220:1:248:1893:25c8:1946", true, true, true},
		// Loopback in every spelling.
		{"127.0.0.1", false, false, true},
		{"127.1.2.3", false, false, true},
		{"::1", false, false, true},
		{"::1%lo", false, false, false}, // a zone is never dialled, even when loopback is allowed
		{"::1%1", false, false, false},
		{"::ffff:127.0.0.1", false, false, true},
		{"::ffff:7f00:1", false, false, true},
		{"::127.0.0.1", false, false, true}, // IPv4-compatible: judged by what it embeds
		{"::ffff:0:127.0.0.1", false, false, true},
		{"64:ff9b::127.0.0.1", false, false, true},
		{"64:ff9b::7f00:1", false, false, true},
		{"2002:7f00:1::1", false, false, true},
		{"2002:7f00:0001:0:0:0:0:1", false, false, true},
		{"2001:0:7f00:1::", false, false, false},               // Teredo server 127.0.0.1
		{"2001:0:5db8:d822:0:0:80ff:fffe", false, false, true}, // Teredo client (inverted) 127.0.0.1
		// Unspecified: connecting to it reaches the local host.
		{"0.0.0.0", false, false, false},
		{"0.1.2.3", false, false, false},
		{"::", false, false, false},
		{"::%lo", false, false, false},
		{"::ffff:0.0.0.0", false, false, false},
		// Link-local and metadata.
		{"169.254.169.254", false, false, false},
		{"::ffff:169.254.169.254", false, false, false},
		{"::ffff:a9fe:a9fe", false, false, false},
		{"64:ff9b::169.254.169.254", false, false, false},
		{"64:ff9b::a9fe:a9fe", false, false, false},
		{"2002:a9fe:a9fe::", false, false, false},
		{"2002:a9fe:a9fe:ffff::1", false, false, false},
		{"fd00:ec2::254", false, false, false},
		{"100.100.100.200", false, false, false},
		{"169.254.1.1", false, false, false},
		{"fe80::1", false, false, false},
		{"fe80::1%eth0", false, false, false},
		{"FE80::1%25eth0", false, false, false},
		{"febf:ffff::1", false, false, false},
		{"64:ff9b:1::a9fe:a9fe", false, false, false}, // local-use NAT64: refused outright
		// Multicast, broadcast, reserved, documentation.
		{"224.0.0.1", false, false, false},
		{"ff02::1", false, false, false},
		{"ff02::1%eth0", false, false, false},
		{"255.255.255.255", false, false, false},
		{"240.0.0.1", false, false, false},
		{"192.0.0.192", false, false, false},
		{"100::1", false, false, false},
		// Private: only when the rules allow it, in every spelling.
		{"10.0.0.1", false, true, true},
		{"::ffff:10.0.0.1", false, true, true},
		{"64:ff9b::10.0.0.1", false, true, true},
		{"2002:0a00:0001::1", false, true, true},
		{"172.17.0.1", false, true, true},
		{"192.168.1.1", false, true, true},
		{"100.64.0.1", false, true, true},
		{"fd12:3456::1", false, true, true},
		{"fec0::1", false, true, true},
		// Translation prefixes embedding a public address are public.
		{"64:ff9b::93.184.216.34", true, true, true},
		{"2002:5db8:d822::1", true, true, true},
		// A zone on a public address is still refused.
		{"2606:2800:220:1:248:1893:25c8:1946%eth0", false, false, false},
	} {
		ip, err := netip.ParseAddr(strings.Replace(tc.addr, "%25", "%", 1))
		if err != nil {
			t.Fatalf("%s: %v", tc.addr, err)
		}
		for _, c := range []struct {
			name  string
			rules AddrRules
			want  bool
		}{{"public", public, tc.public}, {"private", withPrivate, tc.private}, {"operator", operator, tc.local}} {
			err := c.rules.Check(ip)
			if (err == nil) != c.want {
				t.Errorf("%s rules, %s: allowed=%v, want %v (%v)", c.name, tc.addr, err == nil, c.want, err)
			}
			var refused *RefusedError
			if err != nil && !errors.As(err, &refused) {
				t.Errorf("%s: error %T is not a RefusedError", tc.addr, err)
			}
		}
	}
	if (AddrRules{}).Check(netip.Addr{}) == nil {
		t.Error("the zero address was allowed")
	}
}

// TestAddrRulesDialAttack dials a loopback listener through the rules with every spelling that reaches it: none
// connects, and the listener sees no connection. An operator dial (loopback allowed) still works, so the test is
// not passing because the listener is unreachable.
func TestAddrRulesDialAttack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln6.Close()
	var accepted atomic.Int32
	for _, l := range []net.Listener{ln, ln6} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
	}
	port := ln.Addr().(*net.TCPAddr).Port
	port6 := ln6.Addr().(*net.TCPAddr).Port
	lo := loopbackName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := AddrRules{}.DialContext(5 * time.Second)
	for _, addr := range []string{
		net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		net.JoinHostPort("::ffff:127.0.0.1", strconv.Itoa(port)),
		net.JoinHostPort("0.0.0.0", strconv.Itoa(port)),
		net.JoinHostPort("::", strconv.Itoa(port6)),
		net.JoinHostPort("::%"+lo, strconv.Itoa(port6)),
		net.JoinHostPort("::1", strconv.Itoa(port6)),
		net.JoinHostPort("::1%"+lo, strconv.Itoa(port6)),
		net.JoinHostPort("localhost", strconv.Itoa(port)),
	} {
		c, err := dial(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			t.Errorf("dial %s connected", addr)
			continue
		}
		var refused *RefusedError
		if !errors.As(err, &refused) {
			t.Errorf("dial %s: %v, want a RefusedError", addr, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the loopback listeners accepted %d connections", n)
	}
	c, err := (AddrRules{Loopback: true}).DialContext(5*time.Second)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("operator dial to loopback: %v", err)
	}
	c.Close()
}

// TestAddrRulesHTTPRedirect: a public-looking first hop that redirects to loopback is refused at the redirect's
// dial. The first server stands in for a public host (its loopback address is allowed by a rule made for the
// test); the redirect target is the same loopback, spelt with a zone.
func TestAddrRulesHTTPRedirect(t *testing.T) {
	var hits atomic.Int32
	target := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) })}
	ln6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	go target.Serve(ln6)
	defer target.Close()
	lo := loopbackName(t)
	redirect := "http://[::1%25" + lo + "]:" + strconv.Itoa(ln6.Addr().(*net.TCPAddr).Port) + "/secret"
	first := http.Server{Handler: http.RedirectHandler(redirect, http.StatusFound)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go first.Serve(ln)
	defer first.Close()
	firstAddr := ln.Addr().(*net.TCPAddr).AddrPort()
	rules := AddrRules{}
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: func(network, address string, c syscall.RawConn) error {
		if ap, err := netip.ParseAddrPort(address); err == nil && ap == firstAddr {
			return nil // the stand-in "public" server
		}
		return rules.Control(network, address, c)
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("redirect to %s followed: %s", redirect, resp.Status)
	}
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("redirect: %v, want a RefusedError", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the loopback target was reached")
	}
}

// FuzzAddrRules: the check never panics, and whatever the spelling, an address whose normal form is refused is
// refused.
func FuzzAddrRules(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1%lo", "::%lo", "fe80::1%eth0", "::ffff:169.254.169.254",
		"64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::", "2001:0:5db8:d822::80ff:fffe", "93.184.216.34", "::127.0.0.1",
		"10.0.0.1", "fd00:ec2::254", "[::1%25lo]:80", "127.0.0.1:22"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			if ap, err2 := netip.ParseAddrPort(s); err2 == nil {
				ip = ap.Addr()
				_ = AddrRules{}.Control("tcp", s, nil)
			} else {
				_ = AddrRules{}.Control("tcp", s, nil)
				return
			}
		}
		n, embedded := NormaliseAddr(ip)
		if n.Zone() != "" || n.Is4In6() {
			t.Fatalf("%s normalised to %s", s, n)
		}
		err = AddrRules{}.Check(ip)
		if (AddrRules{}).Check(n) != nil && err == nil {
			t.Fatalf("%s allowed but its normal form %s is refused", s, n)
		}
		for _, e := range embedded {
			if (AddrRules{}).Check(e) != nil && err == nil {
				t.Fatalf("%s allowed but it embeds %s, which is refused", s, e)
			}
		}
		if ip.Zone() != "" && err == nil {
			t.Fatalf("zoned %s allowed", s)
		}
		if n.IsLoopback() || n.IsLinkLocalUnicast() || n.IsUnspecified() || n.IsMulticast() || n.IsPrivate() {
			if err == nil {
				t.Fatalf("%s (%s) allowed", s, n)
			}
		}
	})
}

// loopbackName is the loopback interface's name, for zoned spellings.
func loopbackName(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name
		}
	}
	t.Skip("no loopback interface")
	return ""
}
