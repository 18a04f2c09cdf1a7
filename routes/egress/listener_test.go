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
	"testing"
	"time"
)

// TestSlowHeadsAreCappedPerSource is the slowloris attack: one sandbox opens connections to the proxy and never
// finishes a request head. The handler's tunnel cap cannot see these (no request has arrived), so before
// LimitSources they held the gateway's descriptors without limit. Now the source gets max of them, the next is
// closed on accept, another sandbox is still served, and a slot freed is a slot usable again.
func TestSlowHeadsAreCappedPerSource(t *testing.T) {
	const max = 16
	rig := newTunnelRig(t, &Proxy{}, echo)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rig.proxy, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(LimitSources(ln, max, slog.New(slog.DiscardHandler))) }()
	t.Cleanup(func() { srv.Close() })
	rig.proxyAddr = ln.Addr().String()

	dial := func(src netip.Addr) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", rig.proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var slow []net.Conn
	for range max {
		c := dial(sandboxA)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n", rig.upstream) // and never the rest of the head
		slow = append(slow, c)
	}
	// One over: the proxy closes it without reading; the read's deadline is only a guard against a hang.
	over := dial(sandboxA)
	_ = over.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("connection %d of one source: read gave %v, want it closed", max+1, err)
	}

	conn, br, resp := rig.connect(t, sandboxB)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another sandbox beside the slow heads: %s", resp.Status)
	}
	roundTrip(t, conn, br, "b")

	slow[0].Close()
	// The freed slot is taken again; retried because the proxy notices the close asynchronously.
	waitFor(t, "a freed slot to admit the source again", func() bool {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: sandboxA.AsSlice()}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", rig.proxyAddr)
		if err != nil {
			return false
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", rig.upstream, rig.upstream)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
