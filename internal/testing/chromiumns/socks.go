package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The SOCKS5 protocol (RFC 1928), as much of it as Chromium's socks5:// proxy speaks: no authentication, CONNECT,
// and a destination given as a name or an address.
const (
	socksVersion   = 5
	methodNoAuth   = 0
	methodNone     = 0xff
	cmdConnect     = 1
	atypIPv4       = 1
	atypDomain     = 3
	atypIPv6       = 4
	replySucceeded = 0
	replyNotAllow  = 2
	replyRefused   = 5
	replyCommand   = 7
	replyAddress   = 8
)

// handshakeTimeout bounds a client's greeting and request: Chromium sends both at once.
const handshakeTimeout = 30 * time.Second

// dialer connects to a loopback address of the machine.
type dialer func(ip net.IP, port uint16) (net.Conn, error)

// serve proxies every connection ln accepts until ln is closed.
func serve(ln net.Listener, dial dialer) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go proxy(c, dial)
	}
}

// proxy serves one client: the handshake, then bytes both ways until either side is done.
func proxy(c net.Conn, dial dialer) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	r := bufio.NewReader(c)
	ip, port, err := handshake(r, c)
	if err != nil {
		var refusal *refusal
		if errors.As(err, &refusal) {
			_ = reply(c, refusal.code)
		}
		return
	}
	up, err := dial(ip, port)
	if err != nil {
		_ = reply(c, replyRefused)
		return
	}
	defer up.Close()
	if err := reply(c, replySucceeded); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, r) // r holds anything the client sent after its request
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	<-done
}

// refusal is a request answered with a SOCKS reply code other than success.
type refusal struct {
	code byte
	why  string
}

func (r *refusal) Error() string { return fmt.Sprintf("refused (%d): %s", r.code, r.why) }

// handshake reads a client's greeting and CONNECT request from r, answers the greeting on w, and returns the
// loopback address to connect to. A destination other than localhost, a *.localhost name or a loopback address
// is a *refusal.
func handshake(r *bufio.Reader, w io.Writer) (net.IP, uint16, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, 0, fmt.Errorf("reading the greeting: %w", err)
	}
	if head[0] != socksVersion {
		return nil, 0, fmt.Errorf("SOCKS version %d, not 5", head[0])
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return nil, 0, fmt.Errorf("reading the greeting's methods: %w", err)
	}
	if !strings.ContainsRune(string(methods), methodNoAuth) {
		_, _ = w.Write([]byte{socksVersion, methodNone})
		return nil, 0, errors.New("the client offers no method without authentication")
	}
	if _, err := w.Write([]byte{socksVersion, methodNoAuth}); err != nil {
		return nil, 0, fmt.Errorf("answering the greeting: %w", err)
	}
	var req [4]byte
	if _, err := io.ReadFull(r, req[:]); err != nil {
		return nil, 0, fmt.Errorf("reading the request: %w", err)
	}
	if req[0] != socksVersion {
		return nil, 0, fmt.Errorf("request of SOCKS version %d, not 5", req[0])
	}
	if req[1] != cmdConnect {
		return nil, 0, &refusal{replyCommand, fmt.Sprintf("command %d, not CONNECT", req[1])}
	}
	var ip net.IP
	switch req[3] {
	case atypIPv4, atypIPv6:
		n := net.IPv4len
		if req[3] == atypIPv6 {
			n = net.IPv6len
		}
		ip = make(net.IP, n)
		if _, err := io.ReadFull(r, ip); err != nil {
			return nil, 0, fmt.Errorf("reading the destination address: %w", err)
		}
		if !ip.IsLoopback() {
			return nil, 0, &refusal{replyNotAllow, ip.String() + " is not a loopback address"}
		}
	case atypDomain:
		n, err := r.ReadByte()
		if err != nil {
			return nil, 0, fmt.Errorf("reading the destination name's length: %w", err)
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(r, name); err != nil {
			return nil, 0, fmt.Errorf("reading the destination name: %w", err)
		}
		host := strings.ToLower(strings.TrimSuffix(string(name), "."))
		if host != "localhost" && !strings.HasSuffix(host, ".localhost") {
			return nil, 0, &refusal{replyNotAllow, fmt.Sprintf("%q is not a localhost name", name)}
		}
		ip = net.IPv4(127, 0, 0, 1)
	default:
		return nil, 0, &refusal{replyAddress, fmt.Sprintf("address type %d", req[3])}
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return nil, 0, fmt.Errorf("reading the destination port: %w", err)
	}
	return ip, uint16(port[0])<<8 | uint16(port[1]), nil
}

// reply sends a reply with code; the bound address, which Chromium ignores, is 0.0.0.0:0.
func reply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socksVersion, code, 0, atypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
