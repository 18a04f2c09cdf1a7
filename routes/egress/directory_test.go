package egress

import (
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
