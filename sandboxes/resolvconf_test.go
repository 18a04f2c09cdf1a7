package sandboxes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNameservers(t *testing.T) {
	for _, tc := range []struct {
		name, conf   string
		want         []string
		loopbackOnly bool
	}{
		{"plain", "nameserver 10.0.0.2\n", []string{"10.0.0.2"}, false},
		{"systemd stub only", "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n", nil, true},
		{"stub then upstream", "nameserver 127.0.0.53\nnameserver 192.168.1.1\n", []string{"192.168.1.1"}, false},
		{"link-local and unspecified dropped", "nameserver 169.254.169.253\nnameserver 0.0.0.0\nnameserver fe80::1\n", nil, false},
		{"zone dropped", "nameserver fe80::1%eth0\n", nil, false},
		{"ipv6 and mapped", "nameserver 2001:db8::53\nnameserver ::ffff:10.1.1.1\n", []string{"2001:db8::53", "10.1.1.1"}, false},
		{"at most three", "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\n", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, false},
		{"comments and junk", "# nameserver 10.9.9.9\nnameserver\nnameserver not-an-address\n  nameserver 10.0.0.9  # trailing\n", []string{"10.0.0.9"}, false},
		{"empty", "", nil, false},
		{"ipv6 loopback", "nameserver ::1\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, lo := nameservers([]byte(tc.conf))
			if !slices.Equal(got, tc.want) || lo != tc.loopbackOnly {
				t.Fatalf("nameservers = %v, loopback only %v; want %v, %v", got, lo, tc.want, tc.loopbackOnly)
			}
		})
	}
}

func TestNeedsOwnResolvConf(t *testing.T) {
	for _, tc := range []struct {
		runtime, network string
		want             bool
	}{
		{RuntimeGVisor, NetworkBridge, true},
		{RuntimeGVisor, "corp", true},
		{RuntimeGVisor, "", false}, // internal: Docker's, with the sandbox's own loopback as its only upstream
		{RuntimeGVisor, NetworkInternal, false},
		{RuntimeGVisor, NetworkNone, false},
		{"", NetworkBridge, false},
		{"runc", NetworkBridge, false},
	} {
		if got := needsOwnResolvConf(Profile{Runtime: tc.runtime, Network: tc.network}); got != tc.want {
			t.Errorf("runtime %q network %q: %v, want %v", tc.runtime, tc.network, got, tc.want)
		}
	}
}

// TestWriteResolvConf: the file names the usable resolvers only, is readable by the sandbox user, and a host with
// none usable is an error (the sandbox keeps the engine's file).
func TestWriteResolvConf(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "host-resolv.conf")
	if err := os.WriteFile(host, []byte("nameserver 127.0.0.53\nnameserver 10.0.0.2\nsearch corp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	path, err := writeResolvConf(run, host)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); !strings.HasSuffix(string(b), "nameserver 10.0.0.2\n") || strings.Contains(string(b), "127.0.0.53") ||
		strings.Contains(string(b), "search") || st.Mode().Perm() != 0o644 {
		t.Fatalf("written %q (mode %v)", b, st.Mode())
	}
	if entries, _ := os.ReadDir(run); len(entries) != 1 {
		t.Fatalf("left behind in %s: %v", run, entries)
	}
	if err := os.WriteFile(host, []byte("nameserver 169.254.169.253\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := writeResolvConf(run, host); err == nil {
		t.Fatal("a host with only a link-local resolver: no error")
	}
	if _, err := writeResolvConf(run, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing host resolv.conf: no error")
	}
}
