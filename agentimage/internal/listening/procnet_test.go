package listening

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

const (
	header4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	header6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
)

// hex4 and hex6 print an address the way the kernel does: each 32-bit word as a number in host byte order.
func hex4(a string) string { return kernelHex(netip.MustParseAddr(a).AsSlice()) }
func hex6(a string) string {
	b := netip.MustParseAddr(a).As16()
	return kernelHex(b[:])
}

func kernelHex(raw []byte) string {
	var s strings.Builder
	for i := 0; i < len(raw); i += 4 {
		fmt.Fprintf(&s, "%08X", binary.NativeEndian.Uint32(raw[i:]))
	}
	return s.String()
}

func line(sl int, local string, port int, state string) string {
	return fmt.Sprintf("%4d: %s:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 100 0 0 10 0\n",
		sl, local, port, state, 1000+sl)
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // "addr port"
		wantErr string   // substring; "" for none
	}{
		{name: "empty file", in: "", want: nil},
		{name: "header only", in: header4, want: nil},
		{name: "ipv4 wildcard, loopback and interface", in: header4 +
			line(0, hex4("0.0.0.0"), 5173, "0A") + line(1, hex4("127.0.0.1"), 8080, "0A") + line(2, hex4("172.18.0.2"), 3000, "0A"),
			want: []string{"0.0.0.0 5173", "127.0.0.1 8080", "172.18.0.2 3000"}},
		{name: "connections and time-wait skipped", in: header4 +
			line(0, hex4("172.18.0.2"), 41000, "01") + line(1, hex4("0.0.0.0"), 7777, "0A") + line(2, hex4("127.0.0.1"), 5000, "06"),
			want: []string{"0.0.0.0 7777"}},
		{name: "lowercase state and hex", in: header4 + strings.ToLower(line(0, hex4("127.0.0.1"), 0xabcd, "0a")),
			want: []string{"127.0.0.1 43981"}},
		{name: "ipv6 wildcard, loopback and mapped", in: header6 +
			line(0, hex6("::"), 5173, "0A") + line(1, hex6("::1"), 9000, "0A") + line(2, hex6("::ffff:127.0.0.1"), 9001, "0A") +
			line(3, hex6("fd00::5"), 9002, "0A"),
			want: []string{":: 5173", "::1 9000", "::ffff:127.0.0.1 9001", "fd00::5 9002"}},
		{name: "port 0 and 65535", in: line(0, hex4("0.0.0.0"), 0, "0A") + line(1, hex4("0.0.0.0"), 65535, "0A"),
			want: []string{"0.0.0.0 0", "0.0.0.0 65535"}},
		{name: "blank lines", in: header4 + "\n   \n" + line(0, hex4("0.0.0.0"), 80, "0A"), want: []string{"0.0.0.0 80"}},
		{name: "too few fields", in: header4 + "   0: 00000000:1435 00000000:0000\n", wantErr: "four fields"},
		{name: "no colon after sl", in: "   0 00000000:1435 00000000:0000 0A\n", wantErr: "four fields"},
		{name: "state too long", in: "   0: 00000000:1435 00000000:0000 0AB\n", wantErr: "state"},
		{name: "address not hex", in: "   0: 0000000G:1435 00000000:0000 0A\n", wantErr: "not hex"},
		{name: "address short", in: "   0: 000000:1435 00000000:0000 0A\n", wantErr: "neither 8 nor 32"},
		{name: "address of 16 digits", in: "   0: 0000000000000000:1435 00000000:0000 0A\n", wantErr: "neither 8 nor 32"},
		{name: "no port", in: "   0: 00000000 00000000:0000 0A\n", wantErr: "ADDR:PORT"},
		{name: "port of five digits", in: "   0: 00000000:01435 00000000:0000 0A\n", wantErr: "ADDR:PORT"},
		{name: "port with sign", in: "   0: 00000000:+435 00000000:0000 0A\n", wantErr: "four hex digits"},
		{name: "port not hex", in: "   0: 00000000:14Z5 00000000:0000 0A\n", wantErr: "four hex digits"},
		{name: "malformed listen line after good ones keeps them", in: line(0, hex4("0.0.0.0"), 80, "0A") + "   1: zz:zz 0 0A\n",
			want: []string{"0.0.0.0 80"}, wantErr: "line 2"},
		{name: "over-long line", in: header4 + strings.Repeat("0", 5000) + "\n", wantErr: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in), 100)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tc.wantErr != "" {
				var fe *FormatError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &fe) {
					t.Fatalf("Parse error = %v, want a *FormatError containing %q", err, tc.wantErr)
				}
			}
			var gotS []string
			for _, s := range got {
				gotS = append(gotS, fmt.Sprintf("%s %d", s.Addr, s.Port))
			}
			if strings.Join(gotS, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("Parse = %v, want %v", gotS, tc.want)
			}
		})
	}
}

// TestParseLimit: a sandbox that opens more listening sockets than the limit gets the first ones and ErrTooMany,
// not an unbounded reply.
func TestParseLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(header4)
	for i := range 50 {
		b.WriteString(line(i, hex4("0.0.0.0"), 10000+i, "0A"))
	}
	got, err := Parse(strings.NewReader(b.String()), 10)
	if !errors.Is(err, ErrTooMany) || len(got) != 10 {
		t.Fatalf("Parse = %d sockets, %v; want 10 and ErrTooMany", len(got), err)
	}
}

// TestList: tcp and tcp6 together, each address and port once, sorted, with scopes and the proxy's reserved ports.
func TestList(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tcp", header4+line(0, hex4("0.0.0.0"), 7777, "0A")+line(1, hex4("127.0.0.1"), 8080, "0A")+
		line(2, hex4("172.18.0.2"), 3000, "0A")+line(3, hex4("127.0.0.1"), 8080, "0A")+line(4, hex4("10.0.0.9"), 40000, "01"))
	write("tcp6", header6+line(0, hex6("::"), 5173, "0A")+line(1, hex6("::ffff:127.0.0.1"), 8080, "0A")+line(2, hex6("::1"), 9000, "0A"))
	l := New(Config{ProcNet: dir, Reserved: map[int]string{7777: "it is the agent's own port"}})
	res, err := l.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []agentapi.ListeningPort{
		{Port: 3000, Address: "172.18.0.2", Scope: agentapi.ScopeInterface},
		{Port: 5173, Address: "::", Scope: agentapi.ScopeAll},
		{Port: 7777, Address: "0.0.0.0", Scope: agentapi.ScopeAll, Reserved: "it is the agent's own port"},
		{Port: 8080, Address: "127.0.0.1", Scope: agentapi.ScopeLoopback},
		{Port: 9000, Address: "::1", Scope: agentapi.ScopeLoopback},
	}
	if res.Truncated || fmt.Sprint(res.Ports) != fmt.Sprint(want) {
		t.Fatalf("List = %+v\nwant %+v", res, want)
	}
	proxied := map[int]bool{}
	for _, p := range res.Ports {
		proxied[p.Port] = p.Proxied()
	}
	if fmt.Sprint(proxied) != fmt.Sprint(map[int]bool{3000: false, 5173: true, 7777: false, 8080: true, 9000: false}) {
		t.Fatalf("Proxied = %v", proxied)
	}

	// No tcp6 (a kernel without IPv6) is not an error; a malformed tcp is.
	if err := os.Remove(filepath.Join(dir, "tcp6")); err != nil {
		t.Fatal(err)
	}
	if res, err := l.List(); err != nil || len(res.Ports) != 3 {
		t.Fatalf("List without tcp6 = %+v, %v", res, err)
	}
	write("tcp", header4+"   0: nonsense 0 0A\n")
	var fe *FormatError
	if _, err := l.List(); !errors.As(err, &fe) {
		t.Fatalf("List of a malformed tcp = %v, want a *FormatError", err)
	}
}

// TestListOwnNamespace reads this process's real /proc/net: a socket the test opens is listed.
func TestListOwnNamespace(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp here")
	}
	ln, port := listenLoopback(t)
	defer ln.Close()
	res, err := New(Config{}).List()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Ports {
		if p.Port == port && p.Address == "127.0.0.1" && p.Scope == agentapi.ScopeLoopback && p.Proxied() {
			return
		}
	}
	t.Fatalf("port %d on 127.0.0.1 not listed: %+v", port, res.Ports)
}
