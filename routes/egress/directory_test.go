package egress

import (
	"net/netip"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestSandboxPolicyNarrowsTheProfiles: a sandbox's own policy never reaches past its profile's allow-list.
func TestSandboxPolicyNarrowsTheProfiles(t *testing.T) {
	p := sandboxes.Profile{ID: "p", Egress: &sandboxes.Egress{Proxy: "http://10.0.0.1:3128", Allow: []string{"pypi.org", "*.example.com"}}}
	plain := SandboxPolicy(p, &sandboxes.Sandbox{ID: "a"})
	own := SandboxPolicy(p, &sandboxes.Sandbox{ID: "b", Egress: &sandboxes.SandboxEgress{Deny: []string{"bad.example.com"}, AllowAnyName: true}})
	for _, tc := range []struct {
		host       string
		plain, own bool
	}{
		{"pypi.org", true, true}, {"bad.example.com", true, false}, {"ok.example.com", true, true}, {"github.com", false, false},
	} {
		if ok, _ := plain.AllowsHost(tc.host); ok != tc.plain {
			t.Errorf("profile policy %s: %v", tc.host, ok)
		}
		if ok, _ := own.AllowsHost(tc.host); ok != tc.own {
			t.Errorf("sandbox policy %s: %v", tc.host, ok)
		}
	}
}

// sourcesFunc answers BySource with a function: the Manager's index is tested in sandboxes (sources_test.go).
type sourcesFunc func(netip.Addr) (sandboxes.SourceMatch, bool)

func (f sourcesFunc) BySource(ip netip.Addr) (sandboxes.SourceMatch, bool) { return f(ip) }

// TestSandboxDirectory: a source the Manager knows is its sandbox under its profile's narrowed policy; any other
// source is no sandbox.
func TestSandboxDirectory(t *testing.T) {
	known := netip.MustParseAddr("172.18.0.5")
	p := sandboxes.Profile{ID: "p", Egress: &sandboxes.Egress{Allow: []string{"pypi.org", "*.example.com"}}}
	sb := &sandboxes.Sandbox{ID: "sb-1", Egress: &sandboxes.SandboxEgress{Deny: []string{"bad.example.com"}, AllowAnyName: true}}
	dir := SandboxDirectory(sourcesFunc(func(ip netip.Addr) (sandboxes.SourceMatch, bool) {
		if ip != known {
			return sandboxes.SourceMatch{}, false
		}
		return sandboxes.SourceMatch{Sandbox: sb, Profile: p}, true
	}))
	c, ok := dir.BySourceIP(known)
	if !ok || c.SandboxID != "sb-1" {
		t.Fatalf("known source: %+v %v", c, ok)
	}
	if ok, _ := c.Policy.AllowsHost("pypi.org"); !ok {
		t.Error("the profile's allow-list does not reach the client")
	}
	if ok, _ := c.Policy.AllowsHost("bad.example.com"); ok {
		t.Error("the sandbox's own deny does not reach the client")
	}
	if _, ok := dir.BySourceIP(netip.MustParseAddr("172.18.0.6")); ok {
		t.Error("an unknown source is a sandbox")
	}
}
