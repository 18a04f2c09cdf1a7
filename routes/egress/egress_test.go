package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestPolicy(t *testing.T) {
	p := Policy{Allow: []string{"pypi.org", "*.example.com", "10.9.8.7", "192.168.50.0/24"}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"pypi.org", true}, {"PYPI.org.", true}, {"evil-pypi.org", false}, {"files.pythonhosted.org", false},
		{"a.example.com", true}, {"a.b.example.com", true}, {"example.com", false}, {"badexample.com", false},
		{"10.9.8.7", true}, {"10.9.8.8", false}, {"192.168.50.9", true}, {"[::1]", false}, {"127.0.0.1", false},
		{"169.254.169.254", false},
	} {
		if ok, why := p.AllowsHost(tc.host); ok != tc.ok {
			t.Errorf("AllowsHost(%s) = %v (%s)", tc.host, ok, why)
		}
	}
	for _, tc := range []struct {
		ip string
		ok bool
	}{
		{"93.184.216.34", true}, {"10.9.8.7", true}, {"10.0.0.1", false}, {"172.17.0.1", false}, {"192.168.50.1", true},
		{"169.254.169.254", false}, {"127.0.0.1", false}, {"::ffff:10.0.0.1", false}, {"fd00:ec2::254", false}, {"fc00::1", false},
	} {
		if ok, why := p.AllowsDial(netip.MustParseAddr(tc.ip)); ok != tc.ok {
			t.Errorf("AllowsDial(%s) = %v (%s)", tc.ip, ok, why)
		}
	}
	// Even an explicit entry cannot open the metadata address.
	meta := Policy{Allow: []string{"169.254.169.254", "169.254.0.0/16"}}
	if ok, _ := meta.AllowsDial(netip.MustParseAddr("169.254.169.254")); ok {
		t.Fatal("metadata address allowed")
	}
	for _, bad := range []string{"", "10.0.0.0/33", "*.", "bad host", "a..b"} {
		if err := (Policy{Allow: []string{bad}}).Validate(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// hostIP is a non-loopback address of this machine, so upstream servers are reachable without the loopback block.
func hostIP(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}

type staticDirectory map[netip.Addr]Client

func (d staticDirectory) BySourceIP(ip netip.Addr) (Client, bool) { c, ok := d[ip]; return c, ok }

type logBuffer struct{ bytes.Buffer }

func TestProxy(t *testing.T) {
	ip := hostIP(t)
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("proxy credentials forwarded upstream")
		}
		fmt.Fprintf(w, "upstream saw %s", r.URL.Path)
	})}}
	upstream.Start()
	defer upstream.Close()
	upHost := ln.Addr().String()

	var logs logBuffer
	proxy := &Proxy{
		Directory: staticDirectory{netip.MustParseAddr("127.0.0.1"): {SandboxID: "sb-1", Policy: Policy{Allow: []string{ip}}}},
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	proxyURL, _ := url.Parse(front.URL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}

	// Absolute-form HTTP to an allowed address.
	resp, err := client.Get("http://" + upHost + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "upstream saw /hello" {
		t.Fatalf("allowed GET: %d %s", resp.StatusCode, body)
	}

	// CONNECT to the allowed address, then HTTP through the tunnel.
	conn, err := net.Dial("tcp", proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", upHost, upHost)
	br := bufio.NewReader(conn)
	cresp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || cresp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", err, cresp)
	}
	fmt.Fprintf(conn, "GET /tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", upHost)
	tresp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(tresp.Body)
	conn.Close()
	if string(body) != "upstream saw /tunnel" {
		t.Fatalf("through the tunnel: %s", body)
	}

	// Refusals: a name not on the list, the metadata address, a private address, CONNECT to loopback.
	for _, target := range []string{"http://not-listed.example/", "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/"} {
		resp, err := client.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Sandgate-Egress") != "refused" {
			t.Fatalf("%s: %d", target, resp.StatusCode)
		}
	}
	conn, _ = net.Dial("tcp", proxyURL.Host)
	fmt.Fprintf(conn, "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n")
	cresp, err = http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	conn.Close()
	if err != nil || cresp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT loopback: %v %v", err, cresp)
	}
	if !strings.Contains(logs.String(), "sandbox=sb-1 host=169.254.169.254") || !strings.Contains(logs.String(), "egress refused") {
		t.Fatalf("refusals not logged with the sandbox id:\n%s", logs.String())
	}

	// An unknown source is refused outright.
	proxy2 := &Proxy{Directory: staticDirectory{}, Logger: slog.New(slog.DiscardHandler)}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "http://"+upHost+"/", nil)
	proxy2.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("unknown source: %d", rec.Code)
	}
}

// A name resolving to a private address is refused at dial time even if the name is allowed (DNS rebinding).
func TestAllowedNameResolvingPrivateIsRefused(t *testing.T) {
	proxy := &Proxy{
		Directory: staticDirectory{netip.MustParseAddr("192.0.2.1"): {SandboxID: "sb-2", Policy: Policy{Allow: []string{"localhost"}}}},
		Logger:    slog.New(slog.DiscardHandler),
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "http://localhost:9/", nil)
	req.RemoteAddr = "192.0.2.1:5555"
	proxy.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "loopback") {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

// TestPolicyDenyAnyAndWithin: a sandbox's own policy (deny names, allow any other name) inside its profile's list.
func TestPolicyDenyAnyAndWithin(t *testing.T) {
	own := Policy{Deny: []string{"evil.example.com", "*.tracker.net"}, AllowAnyName: true}
	if err := own.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"pypi.org", true}, {"evil.example.com", false}, {"EVIL.example.com.", false}, {"good.example.com", true},
		{"a.tracker.net", false}, {"tracker.net", true}, {"93.184.216.34", true}, {"10.0.0.1", false},
		{"127.0.0.1", false}, {"169.254.169.254", false},
	} {
		if ok, why := own.AllowsHost(tc.host); ok != tc.ok {
			t.Errorf("own AllowsHost(%s) = %v (%s)", tc.host, ok, why)
		}
	}
	// Narrowed by the profile's list: both must admit, whatever either says alone.
	profile := Policy{Allow: []string{"pypi.org", "*.example.com", "10.9.8.7"}}
	in := own
	in.Within = &profile
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"pypi.org", true}, {"good.example.com", true}, {"evil.example.com", false}, {"github.com", false},
		{"10.9.8.7", true}, {"10.9.8.8", false}, {"93.184.216.34", false},
	} {
		if ok, why := in.AllowsHost(tc.host); ok != tc.ok {
			t.Errorf("within AllowsHost(%s) = %v (%s)", tc.host, ok, why)
		}
	}
	// A private address passes a dial only where every policy in the chain names it.
	both := Policy{Allow: []string{"10.9.8.7"}, Within: &profile}
	if ok, _ := both.AllowsDial(netip.MustParseAddr("10.9.8.7")); !ok {
		t.Error("an address both lists name was refused")
	}
	// Default allow inside a profile keeps the private destinations the operator named, and only those.
	if ok, _ := in.AllowsDial(netip.MustParseAddr("10.9.8.7")); !ok {
		t.Error("a default-allow sandbox policy lost its profile's private destination")
	}
	if ok, _ := in.AllowsDial(netip.MustParseAddr("10.9.8.8")); ok {
		t.Error("a default-allow sandbox policy opened a private address its profile does not name")
	}
	alone := Policy{AllowAnyName: true}
	if ok, _ := alone.AllowsDial(netip.MustParseAddr("10.9.8.7")); ok {
		t.Error("AllowAnyName alone opened a private address")
	}
	narrowOnly := Policy{Allow: []string{"10.1.1.1"}, Within: &profile}
	if ok, _ := narrowOnly.AllowsDial(netip.MustParseAddr("10.1.1.1")); ok {
		t.Error("a sandbox list widened its profile's")
	}
	for _, bad := range []string{"", "10.0.0.0/8", "a b"} {
		if err := (Policy{Deny: []string{bad}}).Validate(); err == nil {
			t.Errorf("deny %q accepted", bad)
		}
	}
}
