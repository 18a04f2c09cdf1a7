package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

func TestHandshake(t *testing.T) {
	greeting := []byte{5, 1, 0}
	connect := func(atyp byte, addr ...byte) []byte {
		return append(append([]byte{5, 1, 0, atyp}, addr...), 0x1f, 0x90) // port 8080
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	for _, tc := range []struct {
		name    string
		in      []byte
		ip      string
		refused byte   // the reply code of a *refusal, 0 for none
		err     string // a plain error's text, when not a refusal
		answer  []byte // what the greeting is answered with
	}{
		{name: "localhost", in: append(greeting, connect(atypDomain, name("localhost")...)...), ip: "127.0.0.1", answer: []byte{5, 0}},
		{name: "a subdomain of localhost", in: append(greeting, connect(atypDomain, name("49983-sbx.sandbox.localhost")...)...), ip: "127.0.0.1", answer: []byte{5, 0}},
		{name: "a rooted, upper-case name", in: append(greeting, connect(atypDomain, name("App.LOCALHOST.")...)...), ip: "127.0.0.1", answer: []byte{5, 0}},
		{name: "IPv4 loopback", in: append(greeting, connect(atypIPv4, 127, 0, 0, 1)...), ip: "127.0.0.1", answer: []byte{5, 0}},
		{name: "IPv6 loopback", in: append(greeting, connect(atypIPv6, net.IPv6loopback...)...), ip: "::1", answer: []byte{5, 0}},
		{name: "several methods", in: append([]byte{5, 3, 2, 1, 0}, connect(atypDomain, name("localhost")...)...), ip: "127.0.0.1", answer: []byte{5, 0}},
		{name: "another machine's name", in: append(greeting, connect(atypDomain, name("example.com")...)...), refused: replyNotAllow, answer: []byte{5, 0}},
		{name: "a name ending in localhost", in: append(greeting, connect(atypDomain, name("evillocalhost")...)...), refused: replyNotAllow, answer: []byte{5, 0}},
		{name: "another address", in: append(greeting, connect(atypIPv4, 10, 0, 0, 1)...), refused: replyNotAllow, answer: []byte{5, 0}},
		{name: "the metadata address", in: append(greeting, connect(atypIPv4, 169, 254, 169, 254)...), refused: replyNotAllow, answer: []byte{5, 0}},
		{name: "BIND", in: append(greeting, 5, 2, 0, atypIPv4, 127, 0, 0, 1, 0, 80), refused: replyCommand, answer: []byte{5, 0}},
		{name: "unknown address type", in: append(greeting, 5, 1, 0, 9), refused: replyAddress, answer: []byte{5, 0}},
		{name: "SOCKS4", in: []byte{4, 1, 0, 80, 127, 0, 0, 1, 0}, err: "SOCKS version 4"},
		{name: "authentication only", in: []byte{5, 1, 2}, err: "no method without authentication", answer: []byte{5, 0xff}},
		{name: "cut short in the greeting", in: []byte{5, 2, 0}, err: "greeting's methods"},
		{name: "cut short in the name", in: append(greeting, 5, 1, 0, atypDomain, 9, 'l', 'o'), err: "destination name", answer: []byte{5, 0}},
		{name: "cut short in the port", in: append(greeting, 5, 1, 0, atypIPv4, 127, 0, 0, 1, 0), err: "destination port", answer: []byte{5, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answer bytes.Buffer
			ip, port, err := handshake(bufio.NewReader(bytes.NewReader(tc.in)), &answer)
			if !bytes.Equal(answer.Bytes(), tc.answer) {
				t.Errorf("greeting answered % x, want % x", answer.Bytes(), tc.answer)
			}
			var r *refusal
			switch {
			case tc.refused != 0:
				if !errors.As(err, &r) || r.code != tc.refused {
					t.Fatalf("err = %v, want a refusal with code %d", err, tc.refused)
				}
			case tc.err != "":
				if err == nil || errors.As(err, &r) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want a plain error saying %q", err, tc.err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !ip.Equal(net.ParseIP(tc.ip)) || port != 8080 {
					t.Fatalf("destination %v:%d, want %s:8080", ip, port, tc.ip)
				}
			}
		})
	}
}

// TestProxyRelays: a client through the proxy reaches a loopback server and both directions carry bytes, and a
// refused destination gets its reply code and no connection.
func TestProxyRelays(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("echo " + line))
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serve(ln, dialLoopback)

	port := echo.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Greeting, request and the first payload in one write, as a hurried client sends them.
	req := append([]byte{5, 1, 0, 5, 1, 0, atypDomain, 9}, "localhost"...)
	req = append(req, byte(port>>8), byte(port))
	if _, err := c.Write(append(req, "hello\n"...)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2+10)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:3], []byte{5, 0, 5}) || got[3] != replySucceeded {
		t.Fatalf("answers % x", got)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "echo hello\n" {
		t.Fatalf("relayed %q, %v", line, err)
	}

	refused, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if _, err := refused.Write(append([]byte{5, 1, 0, 5, 1, 0, atypIPv4, 192, 0, 2, 1}, byte(port>>8), byte(port))); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(refused, got); err != nil {
		t.Fatal(err)
	}
	if got[3] != replyNotAllow {
		t.Fatalf("a non-loopback destination answered % x", got)
	}
}
