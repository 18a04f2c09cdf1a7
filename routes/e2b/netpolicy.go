package e2b

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sandgate/sandgate/routes/egress"
	"github.com/sandgate/sandgate/sandboxes"
)

// egressFor maps E2B's outbound options onto what the profile can enforce for one sandbox. E2B's rules:
// allow_internet_access false equals denyOut ["0.0.0.0/0"]; denyOut lists CIDRs (or names) refused; allowOut
// names what is let through in spite of a deny. sandgate has two layers: the engine's address policy, which
// refuses the host, private and metadata ranges on every network whatever a policy says, and the profile's egress
// proxy (network internal with egress.proxy), which can narrow one sandbox's names. Whatever neither layer
// enforces for this sandbox is refused with the reason, never dropped.
func egressFor(internet *bool, nw *NetworkConfig, prof sandboxes.Profile) (*sandboxes.SandboxEgress, bool, *Error) {
	refuse := func(format string, args ...any) (*sandboxes.SandboxEgress, bool, *Error) {
		return nil, false, errorf(http.StatusBadRequest, format, args...)
	}
	var allowOut, denyOut []string
	if nw != nil {
		allowOut, denyOut = nw.AllowOut, nw.DenyOut
	}
	denyAll := internet != nil && !*internet
	var denyNames []string
	for i, d := range denyOut {
		t := strings.ToLower(strings.TrimSpace(d))
		switch {
		case t == "0.0.0.0/0" || t == "::/0":
			denyAll = true
		case !validTarget(t):
			return refuse("network.denyOut[%d] %q is not an address, CIDR, host name or *.domain", i, d)
		case nonPublic(t):
			// The address policy refuses it on every network already.
		case isAddr(t):
			return refuse("network.denyOut[%d] %q: sandgate cannot deny one public address range for one sandbox; deny names (the egress proxy filters by name) or every address (0.0.0.0/0)", i, d)
		default:
			denyNames = append(denyNames, t)
		}
	}
	for i, a := range allowOut {
		t := strings.ToLower(strings.TrimSpace(a))
		if !validTarget(t) {
			return refuse("network.allowOut[%d] %q is not an address, CIDR, host name or *.domain", i, a)
		}
		if nonPublic(t) {
			return refuse("network.allowOut[%d] %q is the host or a private address, which no sandbox can reach", i, a)
		}
	}
	if !denyAll && len(denyNames) == 0 {
		return nil, false, nil // allowOut without a deny allows what is allowed anyway
	}
	if prof.EgressEnforced() {
		// Every connection goes through the egress proxy: this sandbox's own rules narrow the profile's there.
		eg := &sandboxes.SandboxEgress{Deny: denyNames, AllowAnyName: !denyAll}
		if denyAll {
			for _, a := range allowOut {
				eg.Allow = append(eg.Allow, strings.ToLower(strings.TrimSpace(a)))
			}
		}
		return eg, denyAll, nil
	}
	if len(denyNames) > 0 {
		return refuse("network.denyOut %v: denying names needs the egress proxy, and template profile %q does not send its sandboxes through it alone (network internal with egress.proxy)", denyNames, prof.ID)
	}
	reachesNothing := prof.Network == sandboxes.NetworkNone ||
		((prof.Network == "" || prof.Network == sandboxes.NetworkInternal) && (prof.Egress == nil || prof.Egress.Proxy == ""))
	if !reachesNothing {
		return refuse("cutting internet access needs a profile whose sandboxes reach nothing or go through the egress proxy; template profile %q reaches outside (network %q), and sandgate cannot close that for one sandbox", prof.ID, prof.Network)
	}
	if len(allowOut) > 0 {
		return refuse("network.allowOut %v: template profile %q reaches nothing, and opening a name for one sandbox needs the egress proxy (network internal with egress.proxy)", allowOut, prof.ID)
	}
	return nil, true, nil
}

func validTarget(t string) bool {
	if t == "" || len(t) > 253 {
		return false
	}
	return egress.Policy{Allow: []string{t}}.Validate() == nil
}

func isAddr(t string) bool {
	if _, err := netip.ParsePrefix(t); err == nil {
		return true
	}
	_, err := netip.ParseAddr(t)
	return err == nil
}

// nonPublic reports whether the engine's address policy refuses every address t names on every network.
func nonPublic(t string) bool {
	if slices.Contains([]string{"localhost", "host.docker.internal", "gateway.docker.internal"}, t) || strings.HasSuffix(t, ".localhost") {
		return true
	}
	if pf, err := netip.ParsePrefix(t); err == nil {
		first := pf.Masked().Addr()
		last := lastAddr(pf.Masked())
		return (egress.AddrRules{}).Check(first) != nil && (egress.AddrRules{}).Check(last) != nil && sameNonPublicBlock(first, last)
	}
	if a, err := netip.ParseAddr(t); err == nil {
		return (egress.AddrRules{}).Check(a) != nil
	}
	return false
}

// nonPublicBlocks are the ranges the address policy refuses; a prefix is refused whole only inside one of them.
var nonPublicBlocks = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"),
}

func sameNonPublicBlock(a, b netip.Addr) bool {
	for _, p := range nonPublicBlocks {
		if p.Contains(a) && p.Contains(b) {
			return true
		}
	}
	return false
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
