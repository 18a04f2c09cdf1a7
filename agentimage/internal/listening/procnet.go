// Package listening finds the TCP sockets listening inside the sandbox by reading /proc/net/tcp and
// /proc/net/tcp6 of the agent's own network namespace (the sandbox's), and serves them at GET /v1/ports so the
// gateway can approve certificates and routes for ports nothing declared. The files' content is shaped by what
// sandbox code does (how many sockets, which addresses), so the parser treats it as untrusted input: bounded lines,
// bounded results, a typed error for anything malformed.
package listening

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// stateListen is TCP_LISTEN as /proc/net/tcp prints it.
const stateListen = "0A"

// maxLine bounds one line of /proc/net/tcp{,6}: the kernel pads them to 150 (IPv4) or about 170 (IPv6) bytes.
const maxLine = 1024

// Socket is one listening socket.
type Socket struct {
	Addr netip.Addr
	Port uint16
}

// FormatError is a line of /proc/net/tcp{,6} that does not have the kernel's format.
type FormatError struct {
	Line   int
	Reason string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("/proc/net/tcp line %d: %s", e.Line, e.Reason)
}

// ErrTooMany is returned with the first max sockets when more listen.
var ErrTooMany = errors.New("more listening sockets than the limit")

// Parse reads /proc/net/tcp or /proc/net/tcp6 content from r and returns its sockets in LISTEN state, at most max
// of them (ErrTooMany beside them when more are there), in the file's order. The header line is skipped; a line
// that is not the kernel's format, and a line longer than the kernel writes, is a *FormatError. Lines in other
// states are checked only for their state field, so a busy sandbox's connections cost little.
func Parse(r io.Reader, max int) ([]Socket, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxLine)
	var out []Socket
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if n == 1 && fields[0] == "sl" {
			continue
		}
		if len(fields) < 4 || !strings.HasSuffix(fields[0], ":") {
			return out, &FormatError{Line: n, Reason: "want at least four fields, the first ending in ':'"}
		}
		if len(fields[3]) != 2 {
			return out, &FormatError{Line: n, Reason: fmt.Sprintf("state %q is not two hex digits", fields[3])}
		}
		if !strings.EqualFold(fields[3], stateListen) {
			continue
		}
		s, err := parseLocal(fields[1])
		if err != nil {
			return out, &FormatError{Line: n, Reason: err.Error()}
		}
		if len(out) >= max {
			return out, ErrTooMany
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return out, &FormatError{Reason: fmt.Sprintf("a line is longer than %d bytes", maxLine)}
		}
		return out, fmt.Errorf("reading /proc/net/tcp: %w", err)
	}
	return out, nil
}

// parseLocal reads "0100007F:1435" or the 32-digit IPv6 form. The kernel prints each 32-bit word of the address
// as a number in the host's byte order, so the words are turned back into network order with the host's.
func parseLocal(s string) (Socket, error) {
	addrHex, portHex, ok := strings.Cut(s, ":")
	if !ok || len(portHex) != 4 {
		return Socket{}, fmt.Errorf("local address %q is not ADDR:PORT", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return Socket{}, fmt.Errorf("port %q is not four hex digits", portHex)
	}
	if len(addrHex) != 8 && len(addrHex) != 32 {
		return Socket{}, fmt.Errorf("address %q is neither 8 nor 32 hex digits", addrHex)
	}
	raw, err := hex.DecodeString(addrHex)
	if err != nil {
		return Socket{}, fmt.Errorf("address %q is not hex", addrHex)
	}
	for i := 0; i < len(raw); i += 4 {
		word := binary.BigEndian.Uint32(raw[i:])
		binary.NativeEndian.PutUint32(raw[i:], word)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return Socket{Addr: addr, Port: uint16(port)}, nil
}
