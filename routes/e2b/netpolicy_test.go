package e2b

import (
	"slices"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestEgressFor: E2B's outbound options become a per-sandbox policy where the egress proxy enforces it, pass as
// they are where the profile already reaches nothing, and are refused (never dropped) elsewhere.
func TestEgressFor(t *testing.T) {
	off := false
	proxied := sandboxes.Profile{ID: "proxied", Network: sandboxes.NetworkInternal, Egress: &sandboxes.Egress{Proxy: "http://10.0.0.1:3128"}}
	closed := sandboxes.Profile{ID: "closed", Network: sandboxes.NetworkInternal}
	open := sandboxes.Profile{ID: "open", Network: sandboxes.NetworkBridge}
	for _, tc := range []struct {
		name       string
		internet   *bool
		nw         *NetworkConfig
		prof       sandboxes.Profile
		want       *sandboxes.SandboxEgress
		noInternet bool
		refused    bool
	}{
		{"nothing asked", nil, nil, open, nil, false, false},
		{"allowOut alone allows what is allowed", nil, &NetworkConfig{AllowOut: []string{"pypi.org"}}, open, nil, false, false},
		{"internet off, proxied", &off, nil, proxied, &sandboxes.SandboxEgress{}, true, false},
		{"deny all but pypi, proxied", nil, &NetworkConfig{DenyOut: []string{"0.0.0.0/0"}, AllowOut: []string{"pypi.org"}}, proxied,
			&sandboxes.SandboxEgress{Allow: []string{"pypi.org"}}, true, false},
		{"deny a name, proxied", nil, &NetworkConfig{DenyOut: []string{"Evil.example.com"}}, proxied,
			&sandboxes.SandboxEgress{Deny: []string{"evil.example.com"}, AllowAnyName: true}, false, false},
		{"deny a private range: the address policy does it", nil, &NetworkConfig{DenyOut: []string{"10.0.0.0/8"}}, open, nil, false, false},
		{"internet off, closed profile", &off, nil, closed, nil, true, false},
		{"internet off, open profile", &off, nil, open, nil, false, true},
		{"deny a name, open profile", nil, &NetworkConfig{DenyOut: []string{"evil.example.com"}}, open, nil, false, true},
		{"deny a public range", nil, &NetworkConfig{DenyOut: []string{"8.8.8.0/24"}}, proxied, nil, false, true},
		{"allow on a closed profile", &off, &NetworkConfig{AllowOut: []string{"pypi.org"}}, closed, nil, false, true},
		{"allow the host", &off, &NetworkConfig{AllowOut: []string{"127.0.0.1"}}, proxied, nil, false, true},
		{"deny across a private and a public range", nil, &NetworkConfig{DenyOut: []string{"0.0.0.0/1"}}, proxied, nil, false, true},
		{"not a target", nil, &NetworkConfig{DenyOut: []string{"a b"}}, proxied, nil, false, true},
	} {
		got, noInternet, e := egressFor(tc.internet, tc.nw, tc.prof)
		if (e != nil) != tc.refused {
			t.Errorf("%s: refused %v (%v)", tc.name, e != nil, e)
			continue
		}
		if e != nil {
			if e.Status != 400 {
				t.Errorf("%s: status %d", tc.name, e.Status)
			}
			continue
		}
		if noInternet != tc.noInternet || (got == nil) != (tc.want == nil) ||
			got != nil && (!slices.Equal(got.Allow, tc.want.Allow) || !slices.Equal(got.Deny, tc.want.Deny) || got.AllowAnyName != tc.want.AllowAnyName) {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, noInternet, tc.want, tc.noInternet)
		}
	}
}
