package sandboxes

import (
	"net"
	"net/netip"
	"slices"
	"time"
)

// sourceIndex finds the sandbox behind a source address on the sandbox network (the egress proxy's question) in
// O(1): address → the entries whose agent has it. Guarded by Manager.mu. It is kept up to date where an entry's
// address changes (setAddrLocked: attach at launch, detach at stop and pause) and where entries come and go
// (reconcile at start, another gateway's changes, detachLocked, forgetRemote). An address can name more than one
// entry for a moment: a dead sandbox keeps the address its container had until it starts again, and the engine
// may hand that address to a new container; BySource takes the live one.
type sourceIndex map[netip.Addr][]*entry

// sourceAddr is the IP of an agent address "host:port"; false for a socket path or anything else without one.
func sourceAddr(addr string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func (s sourceIndex) add(addr string, e *entry) {
	a, ok := sourceAddr(addr)
	if !ok || slices.Contains(s[a], e) {
		return
	}
	s[a] = append(s[a], e)
}

func (s sourceIndex) remove(addr string, e *entry) {
	a, ok := sourceAddr(addr)
	if !ok {
		return
	}
	if rest := slices.DeleteFunc(s[a], func(x *entry) bool { return x == e }); len(rest) > 0 {
		s[a] = rest
	} else {
		delete(s, a)
	}
}

// setAddrLocked attaches e to the address its agent has now ("" when its container is stopped or gone).
func (m *Manager) setAddrLocked(e *entry, addr string) {
	m.sources.remove(e.rec.Addr, e)
	e.rec.Addr = addr
	m.indexLocked(e)
}

// setRecordLocked replaces e's record (another gateway's change) and moves e in the index with it.
func (m *Manager) setRecordLocked(e *entry, rec Record) {
	m.sources.remove(e.rec.Addr, e)
	e.rec = rec
	m.indexLocked(e)
}

// indexLocked enters e under the address its record holds: a new entry (create, reconcile, another gateway's)
// or one whose address changed.
func (m *Manager) indexLocked(e *entry) {
	if !e.deleted {
		m.sources.add(e.rec.Addr, e)
	}
}

// unindexLocked takes e out of the index: it is leaving the Manager's entries.
func (m *Manager) unindexLocked(e *entry) { m.sources.remove(e.rec.Addr, e) }

// SourceMatch is the sandbox an egress connection came from: the sandbox as Get shows it and its profile as
// configured now (whose egress allow-list bounds the sandbox's own policy).
type SourceMatch struct {
	Sandbox *Sandbox
	Profile Profile
}

// BySource finds the ready sandbox whose agent has address ip on the sandbox network, from memory and in O(1).
// Warm-pool members, sandboxes not running (stopped, paused, starting, dead) and expired ones match nothing, as
// Resolve does not resolve them. Were two ready sandboxes to share an address, the newest wins, as List orders.
func (m *Manager) BySource(ip netip.Addr) (SourceMatch, bool) {
	now := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	var found *entry
	for _, e := range m.sources[ip] {
		if !m.resolvableLocked(e, now) {
			continue
		}
		if found == nil || newestFirst(e, found) < 0 {
			found = e
		}
	}
	if found == nil {
		return SourceMatch{}, false
	}
	return SourceMatch{Sandbox: m.snapshotLocked(found, now), Profile: m.profiles[found.rec.Profile]}, true
}
