package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Two sandboxes, told apart by their source address on loopback (Linux routes all of 127/8 to lo).
var (
	sandboxA = netip.MustParseAddr("127.0.0.2")
	sandboxB = netip.MustParseAddr("127.0.0.3")
)

// tunnelRig is a proxy serving two sandboxes, both allowed to reach one upstream listener of this machine.
type tunnelRig struct {
	proxy     *Proxy
	proxyAddr string
	upstream  string // host:port of the upstream listener
}

// newTunnelRig starts the proxy on loopback and an upstream on a non-loopback address of this machine (loopback is
// refused by the address policy whatever the list says) that runs serve on every connection.
func newTunnelRig(t *testing.T, p *Proxy, serve func(net.Conn)) *tunnelRig {
	t.Helper()
	ip := hostIP(t)
	up, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	pol := Policy{Allow: []string{ip}}
	p.Directory = staticDirectory{sandboxA: {SandboxID: "sb-a", Policy: pol}, sandboxB: {SandboxID: "sb-b", Policy: pol}}
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return &tunnelRig{proxy: p, proxyAddr: ln.Addr().String(), upstream: up.Addr().String()}
}

// connect opens a CONNECT tunnel from sandbox src to the upstream; it returns the connection and the proxy's
// answer. The connection is closed with the test.
func (r *tunnelRig) connect(t *testing.T, src netip.Addr) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", r.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", r.upstream, r.upstream)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, resp
}

func echo(c net.Conn) { _, _ = io.Copy(c, c) }

// roundTrip sends one line through a tunnel to an echo upstream and checks it comes back.
func roundTrip(t *testing.T, conn net.Conn, br *bufio.Reader, line string) {
	t.Helper()
	if _, err := io.WriteString(conn, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := br.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("through the tunnel: %q %v", got, err)
	}
}

// waitFor polls cond, an observable state, until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestTunnelFloodIsCapped is the attack: one sandbox opens tunnels to an allowed host and holds them idle. Before
// the cap every one succeeded, each holding two descriptors and goroutines of the gateway for ever. Now the
// sandbox gets DefaultMaxTunnels, then a typed 429, while another sandbox still gets a tunnel, and a slot freed is
// a slot it can use again.
func TestTunnelFloodIsCapped(t *testing.T) {
	rig := newTunnelRig(t, &Proxy{}, echo)
	var first net.Conn
	for i := range DefaultMaxTunnels {
		conn, _, resp := rig.connect(t, sandboxA)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tunnel %d: %s", i+1, resp.Status)
		}
		if i == 0 {
			first = conn
		}
	}
	conn, _, resp := rig.connect(t, sandboxA)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("tunnel %d of one sandbox: %s, want 429", DefaultMaxTunnels+1, resp.Status)
	}
	body, _ := io.ReadAll(resp.Body) // ends: the refusal closes the connection
	conn.Close()
	if resp.Header.Get("X-Sandgate-Egress") != "limit" || !strings.Contains(string(body), "sb-a already holds 128 open connections") {
		t.Fatalf("tunnel %d of one sandbox: %s %q", DefaultMaxTunnels+1, resp.Status, body)
	}
	if n := rig.proxy.Open("sb-a"); n != DefaultMaxTunnels {
		t.Fatalf("sb-a holds %d", n)
	}

	other, obr, resp := rig.connect(t, sandboxB)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another sandbox beside the flood: %s", resp.Status)
	}
	roundTrip(t, other, obr, "b")

	first.Close()
	waitFor(t, "sb-a's closed tunnel to free its slot", func() bool { return rig.proxy.Open("sb-a") == DefaultMaxTunnels-1 })
	conn, br, resp := rig.connect(t, sandboxA)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a tunnel closed: %s", resp.Status)
	}
	roundTrip(t, conn, br, "a")
}

// TestIdleTunnelCloses: a tunnel that moves nothing either way is closed by the proxy after the idle timeout, and
// its slot is freed.
func TestIdleTunnelCloses(t *testing.T) {
	const idle = 300 * time.Millisecond
	rig := newTunnelRig(t, &Proxy{IdleTimeout: idle}, echo)
	conn, br, resp := rig.connect(t, sandboxA)
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
	// The proxy stamps a tunnel's last byte when it relays the echo, which is after this write and before the
	// client reads the echo; only the time before the write is a sure lower bound for the idle close.
	sent := time.Now()
	roundTrip(t, conn, br, "hello")
	// The safety deadline only keeps a broken proxy from hanging the test; the proxy's close is what ends the read.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle tunnel: read gave %v, want the proxy's close", err)
	}
	if d := time.Since(sent); d < idle {
		t.Fatalf("closed after %v, before the idle timeout %v", d, idle)
	}
	waitFor(t, "the idle tunnel's slot to be freed", func() bool { return rig.proxy.Open("sb-a") == 0 })
}

// TestOneWayTrafficKeepsTunnel: bytes moving in one direction only keep a tunnel open past the idle timeout; it
// closes once nothing moves.
func TestOneWayTrafficKeepsTunnel(t *testing.T) {
	const idle = time.Second
	got := make(chan int, 1)
	rig := newTunnelRig(t, &Proxy{IdleTimeout: idle}, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c) // a sink that never answers
		got <- int(n)
	})
	conn, br, resp := rig.connect(t, sandboxA)
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
	// Pacing, not synchronisation: ten bytes spread over twice the idle timeout.
	const sent = 10
	for range sent {
		if _, err := conn.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idle / 5)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("read gave %v, want the proxy's close once idle", err)
	}
	if n := <-got; n != sent {
		t.Fatalf("upstream got %d bytes of %d: the tunnel closed while one direction was moving", n, sent)
	}
}

// TestTunnelsReleaseGoroutinesAndFDs: once tunnels end, the proxy holds no goroutine or descriptor for them.
func TestTunnelsReleaseGoroutinesAndFDs(t *testing.T) {
	rig := newTunnelRig(t, &Proxy{}, echo)
	// Warm the proxy (its transport, the server's listener goroutines) before measuring.
	conn, br, _ := rig.connect(t, sandboxB)
	roundTrip(t, conn, br, "warm")
	conn.Close()
	waitFor(t, "the warm-up tunnel to close", func() bool { return rig.proxy.Open("sb-b") == 0 })
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)

	const n = 40
	conns := make([]net.Conn, 0, n)
	for range n {
		conn, br, resp := rig.connect(t, sandboxA)
		if resp.StatusCode != http.StatusOK {
			t.Fatal(resp.Status)
		}
		roundTrip(t, conn, br, "x")
		conns = append(conns, conn)
	}
	if g := runtime.NumGoroutine(); g < goroutines+2*n {
		t.Fatalf("%d goroutines with %d tunnels open, %d before: the measure is wrong", g, n, goroutines)
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= goroutines })
	waitFor(t, "descriptors back to the baseline", func() bool { return openFDs(t) <= fds })
	if o := rig.proxy.Open("sb-a"); o != 0 {
		t.Fatalf("sb-a still holds %d", o)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// TestForwardedRequestsShareTheCap: absolute-form requests hold an upstream connection too, so they count against
// the same cap while they run.
func TestForwardedRequestsShareTheCap(t *testing.T) {
	rig := newTunnelRig(t, &Proxy{MaxTunnels: 1}, echo)
	_, _, resp := rig.connect(t, sandboxA)
	if resp.StatusCode != http.StatusOK || rig.proxy.Open("sb-a") != 1 {
		t.Fatal(resp.Status)
	}

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: sandboxA.AsSlice()}}
	c, err := d.Dial("tcp", rig.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", rig.upstream, rig.upstream)
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a forwarded request beyond the cap: %v %v", err, resp)
	}
}

// TestStalledForwardedResponseEnds: a forwarded response whose upstream stops sending mid-body is ended after the
// idle timeout, and its slot freed, rather than held for ever.
func TestStalledForwardedResponseEnds(t *testing.T) {
	const idle = 300 * time.Millisecond
	rig := newTunnelRig(t, &Proxy{IdleTimeout: idle}, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
		_, _ = io.Copy(io.Discard, c) // then nothing, until the proxy gives up
	})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: sandboxA.AsSlice()}}
	c, err := d.Dial("tcp", rig.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a wait
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", rig.upstream, rig.upstream)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%v %v", err, resp)
	}
	body, err := io.ReadAll(resp.Body)
	if string(body) != "part" || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled body: %q %v, want the part sent and the response cut off by the proxy", body, err)
	}
	waitFor(t, "the stalled request's slot to be freed", func() bool { return rig.proxy.Open("sb-a") == 0 })
}
