package egress

import (
	"net/netip"

	"github.com/sandgate/sandgate/sandboxes"
)

// Sources finds the sandbox behind a source address: (*sandboxes.Manager).BySource, an index the Manager keeps
// as sandboxes attach and detach.
type Sources interface {
	BySource(ip netip.Addr) (sandboxes.SourceMatch, bool)
}

// SandboxDirectory is the Directory of a Manager's sandboxes: each one's policy is its profile's allow-list,
// narrowed by its own (SandboxPolicy).
func SandboxDirectory(s Sources) Directory { return sandboxDirectory{s} }

type sandboxDirectory struct{ sources Sources }

func (d sandboxDirectory) BySourceIP(ip netip.Addr) (Client, bool) {
	m, ok := d.sources.BySource(ip)
	if !ok {
		return Client{}, false
	}
	return Client{SandboxID: m.Sandbox.ID, Policy: SandboxPolicy(m.Profile, m.Sandbox)}, true
}

// SandboxPolicy is the profile's allow-list, narrowed by the sandbox's own policy when it has one.
func SandboxPolicy(p sandboxes.Profile, sb *sandboxes.Sandbox) Policy {
	var pol Policy
	if p.Egress != nil {
		pol.Allow = p.Egress.Allow
	}
	if sb.Egress == nil {
		return pol
	}
	return Policy{Allow: sb.Egress.Allow, Deny: sb.Egress.Deny, AllowAnyName: sb.Egress.AllowAnyName, Within: &pol}
}
