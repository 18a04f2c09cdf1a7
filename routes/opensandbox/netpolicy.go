package opensandbox

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/sandgate/sandgate/routes/egress"
	"github.com/sandgate/sandgate/sandboxes"
)

// networkPolicy mapping. sandgate polices a sandbox's outbound traffic in two layers: the engine's address policy
// on every network it runs sandboxes on (the host, private and metadata ranges are unreachable whatever the name
// resolves to), and the profile's egress allow-list proxy (routes/egress), which names the only hosts a sandbox on an
// internal network reaches. A policy is accepted only where those layers already give at least what it asks to
// deny; a rule they cannot enforce for this one sandbox is refused with the reason, never silently dropped.
//
// Enforceable today:
//   - defaultAction allow with deny rules on host-local names (localhost, *.docker.internal, *.orb.internal,
//     *.orb.local, ...) or on loopback, private or link-local addresses: the address policy refuses them all (this is
//     FastGPT's Docker policy);
//   - defaultAction deny with no allow rules, on a profile whose sandboxes reach nothing (network none, or internal
//     without an egress proxy).
//
// Refused: a deny of a public name or address under default allow, and any allow rule under default deny (both
// need a per-sandbox name filter; the profile's egress allow-list is the operator's, shared by its sandboxes).

// hostLocalNames and hostLocalSuffixes are names that only ever resolve to the host or to private addresses of container runtimes.
var hostLocalNames = []string{"localhost", "host.docker.internal", "gateway.docker.internal"}
var hostLocalSuffixes = []string{".localhost", ".docker.internal", ".orb.internal", ".orb.local"}

func hostLocal(target string) bool {
	t := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(target)), ".")
	t = strings.TrimPrefix(t, "*")
	for _, n := range hostLocalNames {
		if t == n {
			return true
		}
	}
	for _, s := range hostLocalSuffixes {
		if strings.HasSuffix(t, s) || t == s {
			return true
		}
	}
	if pf, err := netip.ParsePrefix(t); err == nil {
		return nonPublic(pf.Addr()) && pf.Bits() >= nonPublicBits(pf.Addr())
	}
	if a, err := netip.ParseAddr(t); err == nil {
		return nonPublic(a)
	}
	return false
}

// nonPublic reports whether the address policy refuses a as a sandbox destination (no private address is ever
// named by a tenant policy, so every private address counts).
func nonPublic(a netip.Addr) bool {
	return (egress.AddrRules{}).Check(a) != nil
}

// nonPublicBits is how long a prefix must be to stay inside the non-public range that holds a.
func nonPublicBits(a netip.Addr) int {
	for _, pf := range []string{"127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
		"100.64.0.0/10", "::1/128", "fc00::/7", "fe80::/10"} {
		p := netip.MustParsePrefix(pf)
		if p.Contains(a) {
			return p.Bits()
		}
	}
	return 128
}

func validTarget(t string) bool {
	t = strings.TrimSpace(t)
	if t == "" || len(t) > 253 {
		return false
	}
	return egress.Policy{Allow: []string{t}}.Validate() == nil
}

// checkNetworkPolicy maps np onto what the profile can enforce: nil when the engine's address policy alone does
// it, a SandboxEgress for the egress proxy when the profile sends everything through it, or a refusal.
func checkNetworkPolicy(np *NetworkPolicy, prof sandboxes.Profile) (*sandboxes.SandboxEgress, *Error) {
	if np == nil || (np.DefaultAction == "" && len(np.Egress) == 0) {
		return nil, nil
	}
	refuse := func(format string, args ...any) (*sandboxes.SandboxEgress, *Error) {
		return nil, errorf(http.StatusBadRequest, CodePolicyNotEnforceable, format, args...)
	}
	def := np.DefaultAction
	if def == "" {
		def = "deny" // OpenSandbox's default
	}
	if def != "allow" && def != "deny" {
		return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "networkPolicy.defaultAction must be allow or deny, not %q", np.DefaultAction)
	}
	for i, r := range np.Egress {
		if r.Action != "allow" && r.Action != "deny" {
			return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "networkPolicy.egress[%d].action must be allow or deny, not %q", i, r.Action)
		}
		if !validTarget(r.Target) {
			return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "networkPolicy.egress[%d].target %q is not a host name, *.domain, address or prefix", i, r.Target)
		}
		if r.Action == "allow" && hostLocal(r.Target) {
			return refuse("networkPolicy.egress[%d]: %q is the host or a private address, which no sandbox policy can open", i, r.Target)
		}
	}
	if prof.EgressEnforced() {
		// Every connection goes through the egress proxy: the sandbox gets its own rules there, inside the
		// profile's allow-list. Deny rules are applied before allow rules, which is stricter than first-match
		// where an allow precedes a deny of the same host.
		eg := &sandboxes.SandboxEgress{AllowAnyName: def == "allow"}
		for i, r := range np.Egress {
			t := strings.ToLower(strings.TrimSpace(r.Target))
			isAddr := isAddrTarget(t)
			switch {
			case r.Action == "allow":
				eg.Allow = append(eg.Allow, t)
			case hostLocal(t):
				// The address policy refuses it whatever the proxy says; a name is denied there too.
				if !isAddr {
					eg.Deny = append(eg.Deny, t)
				}
			case isAddr:
				return refuse("networkPolicy.egress[%d]: deny rules take host names; %q is an address", i, r.Target)
			default:
				eg.Deny = append(eg.Deny, t)
			}
		}
		return eg, nil
	}
	switch def {
	case "allow":
		for i, r := range np.Egress {
			if r.Action == "deny" && !hostLocal(r.Target) {
				return refuse("networkPolicy.egress[%d]: denying %q needs the egress proxy, and profile %q does not send its sandboxes through it alone (network internal with egress.proxy); without it the gateway refuses only the host, private and metadata addresses (docs/opensandbox.md)", i, r.Target, prof.ID)
			}
		}
		return nil, nil
	default:
		for i, r := range np.Egress {
			if r.Action == "allow" {
				return refuse("networkPolicy.egress[%d]: allowing %q needs the egress proxy, and profile %q does not send its sandboxes through it alone (network internal with egress.proxy)", i, r.Target, prof.ID)
			}
		}
		reachesNothing := prof.Network == sandboxes.NetworkNone ||
			((prof.Network == "" || prof.Network == sandboxes.NetworkInternal) && (prof.Egress == nil || prof.Egress.Proxy == ""))
		if !reachesNothing {
			return refuse("networkPolicy defaultAction deny: sandboxes of profile %q reach outside (network %q, egress proxy %q), and this gateway cannot close that for one sandbox", prof.ID, prof.Network, egressProxy(prof))
		}
		return nil, nil
	}
}

func isAddrTarget(t string) bool {
	if _, err := netip.ParsePrefix(t); err == nil {
		return true
	}
	_, err := netip.ParseAddr(t)
	return err == nil
}

func egressProxy(p sandboxes.Profile) string {
	if p.Egress == nil {
		return ""
	}
	return p.Egress.Proxy
}
