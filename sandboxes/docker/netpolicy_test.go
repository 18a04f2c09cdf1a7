package docker

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNetworkPolicyRules(t *testing.T) {
	p := NetworkPolicy{Interface: "sgabc", Isolate: true, HostAllow: []netip.AddrPort{netip.MustParseAddrPort("172.30.0.1:3128")}}
	var v4 []string
	for _, r := range p.rules() {
		if !r.v6 {
			v4 = append(v4, r.chain+" "+strings.Join(r.args, " "))
		}
		if !slices.Contains(r.args, commentTag+"sgabc") || r.args[0] != "-i" || r.args[1] != "sgabc" {
			t.Errorf("rule %v is not tagged with and scoped to its interface", r.args)
		}
	}
	want := []string{
		"SANDGATE-FWD -i sgabc -o sgabc -m comment --comment sandgate:sgabc -j DROP",
		"SANDGATE-FWD -i sgabc -d 169.254.0.0/16 -m comment --comment sandgate:sgabc -j DROP",
		"SANDGATE-FWD -i sgabc -d 100.100.100.200/32 -m comment --comment sandgate:sgabc -j DROP",
		"SANDGATE-IN -i sgabc -m conntrack --ctstate ESTABLISHED,RELATED -m comment --comment sandgate:sgabc -j RETURN",
		"SANDGATE-IN -i sgabc -d 172.30.0.1 -p tcp --dport 3128 -m comment --comment sandgate:sgabc -j RETURN",
		"SANDGATE-IN -i sgabc -m comment --comment sandgate:sgabc -j DROP",
	}
	if !slices.Equal(v4, want) {
		t.Fatalf("rules:\n%s\nwant:\n%s", strings.Join(v4, "\n"), strings.Join(want, "\n"))
	}
	if n := len(NetworkPolicy{Interface: "x"}.rules()); n != 2*2+2*2+0 {
		t.Fatalf("a named network's policy has %d rules", n)
	}
}

func TestProxyAddr(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"http://172.30.0.1:3128", "172.30.0.1:3128"},
		{"http://10.0.0.1", "10.0.0.1:80"},
		{"https://[::ffff:10.0.0.1]:8443/", "10.0.0.1:8443"},
		{"http://proxy.example:3128", ""},
		{"::not a url", ""},
	}
	for _, tt := range tests {
		ap, ok := proxyAddr(tt.in)
		got := ""
		if ok {
			got = ap.String()
		}
		if got != tt.want {
			t.Errorf("proxyAddr(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTaggedInterface(t *testing.T) {
	for line, want := range map[string]string{
		`-A SANDGATE-IN -i sgabc -m comment --comment sandgate:sgabc -j DROP`:     "sgabc",
		`-A SANDGATE-IN -i sgabc -m comment --comment "sandgate:sgabc" -j RETURN`: "sgabc",
		`-A SANDGATE-IN -i eth0 -m comment --comment other -j DROP`:               "",
		`-N SANDGATE-IN`: "",
	} {
		got, _ := taggedInterface(line)
		if got != want {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
}

// TestPacketFilterIdempotent: applying a policy twice adds nothing, and removal deletes exactly its rules.
func TestPacketFilterIdempotent(t *testing.T) {
	rules := map[bool][]string{}
	f := &packetFilter{run: func(_ context.Context, v6 bool, args ...string) (string, error) {
		line := strings.Join(args[1:], " ")
		switch args[0] {
		case "-N":
			return "", nil
		case "-S":
			out := ""
			for _, r := range rules[v6] {
				if strings.HasPrefix(r, args[1]+" ") {
					out += "-A " + r + "\n"
				}
			}
			return out, nil
		case "-C":
			if slices.Contains(rules[v6], line) {
				return "", nil
			}
			return "", errNoRule
		case "-A":
			rules[v6] = append(rules[v6], line)
		case "-I":
			rules[v6] = append(rules[v6], args[1]+" "+strings.Join(args[3:], " "))
		case "-D":
			rules[v6] = slices.DeleteFunc(rules[v6], func(r string) bool { return r == line })
		}
		return "", nil
	}}
	ctx := context.Background()
	p := NetworkPolicy{Interface: "sgabc", Isolate: true}
	other := NetworkPolicy{Interface: "sgdef"}
	for range 2 {
		if err := f.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Apply(ctx, other); err != nil {
		t.Fatal(err)
	}
	n := len(rules[false]) + len(rules[true])
	if want := len(p.rules()) + len(other.rules()) + 4; n != want { // + the four hooks
		t.Fatalf("%d rules after applying twice, want %d:\n%v", n, want, rules)
	}
	if err := f.Remove(ctx, "sgabc"); err != nil {
		t.Fatal(err)
	}
	for _, rs := range rules {
		for _, r := range rs {
			if strings.Contains(r, "sgabc") {
				t.Fatalf("rule left after removal: %s", r)
			}
		}
	}
	if n := len(rules[false]) + len(rules[true]); n != len(other.rules())+4 {
		t.Fatalf("removal touched other rules: %v", rules)
	}
}

var errNoRule = &ruleError{}

type ruleError struct{}

func (*ruleError) Error() string { return "no such rule" }

// The host lock is per open file, so two holders in one process contend as two gateways would.
func TestLockHostSerialisesHolders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "packetfilter.lock")
	release, err := lockHost(context.Background(), path)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lockHost(ctx, path); !errors.Is(err, ErrPacketFilter) {
		t.Fatalf("second lock while held: got %v, want ErrPacketFilter after the wait is cancelled", err)
	}
	release()
	release2, err := lockHost(context.Background(), path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}
