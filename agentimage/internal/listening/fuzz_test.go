package listening

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func listenLoopback(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// FuzzParse: whatever /proc/net/tcp{,6} holds, Parse neither panics nor returns more than its limit, every socket
// it returns comes from a LISTEN line with a valid IPv4 or IPv6 address, and an error is typed.
func FuzzParse(f *testing.F) {
	f.Add(header4 + line(0, hex4("0.0.0.0"), 5173, "0A") + line(1, hex4("127.0.0.1"), 8080, "01"))
	f.Add(header6 + line(0, hex6("::"), 5173, "0A") + line(1, hex6("::ffff:127.0.0.1"), 9001, "0A"))
	f.Add("   0: 0000000G:1435 00000000:0000 0A\n")
	f.Add("   0: 00000000:+435 00000000:0000 0a\n")
	f.Add("sl\n\n:\n0: : : 0A")
	f.Add(strings.Repeat("1: 00000000:0001 0 0A\n", 20))
	f.Fuzz(func(t *testing.T, in string) {
		const limit = 8
		got, err := Parse(strings.NewReader(in), limit)
		if len(got) > limit {
			t.Fatalf("%d sockets over the limit %d", len(got), limit)
		}
		var fe *FormatError
		if err != nil && !errors.Is(err, ErrTooMany) && !errors.As(err, &fe) {
			t.Fatalf("untyped error %v", err)
		}
		for _, s := range got {
			if !s.Addr.IsValid() || !(s.Addr.Is4() || s.Addr.Is6()) {
				t.Fatalf("invalid address %v", s.Addr)
			}
		}
		if err == nil && !strings.Contains(strings.ToUpper(in), stateListen) && len(got) > 0 {
			t.Fatalf("sockets %v from input without a LISTEN state", got)
		}
	})
}
