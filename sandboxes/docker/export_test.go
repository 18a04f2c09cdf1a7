package docker

import (
	"context"

	"github.com/sandgate/sandgate/sandboxes"
)

// UsageFromCgroups reports whether d reads the container's usage from its cgroups rather than through the engine.
func UsageFromCgroups(ctx context.Context, d *Driver, containerID string) bool {
	_, ok := d.cgroupUsage(ctx, containerID)
	return ok
}

// BridgeFull is bridgeFull, for its table.
var BridgeFull = bridgeFull

// SweepNetworkPolicy removes the packet-filter rules of networks that no longer exist.
func (d *Driver) SweepNetworkPolicy(ctx context.Context) error { return d.filter.Sweep(ctx) }

// RemoveNetworkPolicy removes the packet-filter rules of a network (before or after it is removed: the rules name
// its interface, which the network's name determines for the gateway's own networks).
func (d *Driver) RemoveNetworkPolicy(ctx context.Context, name string) error {
	iface, err := d.networkInterface(ctx, name)
	if err != nil {
		iface = bridgeName(name)
	}
	d.forgetInterface(name)
	return d.filter.Remove(ctx, iface)
}

// SetWorkspaceDirs moves the capped workspaces' images and links (tests). Call before
// any volume is made.
func (d *Driver) SetWorkspaceDirs(images, links string) {
	d.caps.mu.Lock()
	defer d.caps.mu.Unlock()
	d.caps.images, d.caps.links = images, links
}

// CappedSize is the size limit of volume name, 0 when it has none (tests, reports).
func (d *Driver) CappedSize(name string) int64 {
	size, _ := d.capped(name)
	return size
}

// SpareHoldersFor is SpareHolders for the holders of sandboxes of profile p on network (host aliases included).
func (d *Driver) SpareHoldersFor(network string, p sandboxes.Profile) int {
	key := holderKey(sandboxes.ContainerSpec{Network: network, Profile: p})
	d.holders.mu.Lock()
	defer d.holders.mu.Unlock()
	return len(d.holders.spare[key])
}
