package docker

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/sandgate/sandgate/sandboxes"
)

// MaxBridgePorts is how many containers one Docker bridge network can hold at once: the kernel's BR_MAX_PORTS
// (1024) less port 0, which a bridge never hands out. Every running sandbox of a network holds one port; a start
// past it fails in the engine with EXFULL ("exchange full") while it plugs the container's veth into the bridge.
const MaxBridgePorts = 1023

// bridgeFull reports whether the engine refused a start because the network's bridge has no port left. The engine's
// error is text by the time it arrives (Docker 20.10: "... adding interface vethX to bridge Y failed: exchange full").
func bridgeFull(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), syscall.EXFULL.Error())
}

// networkFull is the typed error of a start refused for a full bridge: a capacity limit like max_sandboxes (scope
// "network"), not an engine failure. The sandbox starts once a member of the network stops or is removed.
func networkFull(name string, err error) error {
	return &sandboxes.Error{Code: sandboxes.CodeQuotaExceeded,
		Message: fmt.Sprintf("network %s is full: a bridge network holds at most %d running sandboxes", name, MaxBridgePorts),
		Hint:    "stop or delete a sandbox of this network, or give the profile a network of its own",
		Details: map[string]any{"scope": "network", "network": name, "limit": MaxBridgePorts}, Err: err}
}
