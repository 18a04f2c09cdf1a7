package docker

import "context"

// UsageFromCgroups reports whether d reads the container's usage from its cgroups rather than through the engine.
func UsageFromCgroups(ctx context.Context, d *Driver, containerID string) bool {
	_, ok := d.cgroupUsage(ctx, containerID)
	return ok
}

// BridgeFull is bridgeFull, for its table.
var BridgeFull = bridgeFull
