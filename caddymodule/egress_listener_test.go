package caddymodule_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// TestEgressConnLimitInCaddy: the listener wrapper, loaded by Caddy as a Caddyfile would configure it, closes a
// source's connection over its cap while another source is still served.
func TestEgressConnLimitInCaddy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`{"admin": {"disabled": true}, "logging": {"logs": {"default": {"level": "ERROR"}}},
		"apps": {"http": {"servers": {"egress": {"listen": [%q],
			"listener_wrappers": [{"wrapper": "sandbox_egress_limit", "max_conns_per_source": 2}],
			"routes": [{"handle": [{"handler": "static_response", "body": "ok", "close": true}]}]}}}}}`, addr)
	if err := caddy.Load([]byte(cfg), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })

	dial := func(src string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a wait
		return c
	}
	for range 2 {
		fmt.Fprint(dial("127.0.0.2"), "GET / HTTP/1.1\r\n") // a head never finished
	}
	if _, err := dial("127.0.0.2").Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		var op *net.OpError
		if !errors.As(err, &op) || op.Timeout() {
			t.Fatalf("third connection of one source: %v, want it closed", err)
		}
	}
	other := dial("127.0.0.3")
	fmt.Fprint(other, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(other)
	if len(b) < 2 || string(b[len(b)-2:]) != "ok" {
		t.Fatalf("another source: %q", b)
	}
}
