package docker

import (
	"fmt"
	"os"
	"strconv"
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

// neighbourEntriesPerSandbox is what one running sandbox on a bridge network takes of the kernel's IPv4 neighbour
// (ARP) table: the host's entry for the sandbox's address (the gateway talks to its agent) and the sandbox's own
// entry for its gateway (the agent answers). The kernel keeps one such table for the whole host: the entries of
// every network namespace, each container's included, count against the same limits.
const neighbourEntriesPerSandbox = 2

// neighbourLimitPath holds gc_thresh3, the most entries the host's IPv4 neighbour table takes (1024 by default).
// Past it the kernel refuses new entries ("neighbor table overflow!" in its log), so a new sandbox's first packets
// to and from the gateway are dropped and retransmitted: measured on 2026-11-28 (24 GiB, 2 cores, the default
// 1024), creates slowed from about three a second to one every few seconds past about 520 running sandboxes, the
// readiness probe of one taking up to 20 s, with the host idle.
const neighbourLimitPath = "/proc/sys/net/ipv4/neigh/default/gc_thresh3"

// Suggested neighbour table limits: room for four full bridge networks of sandboxes (8 × 1023 entries) beside the
// host's own.
const (
	suggestedNeighbourThresh2 = 4096
	suggestedNeighbourThresh3 = 8192
)

// CheckNeighbourTable returns a warning when the host's IPv4 neighbour table (gcThresh3 entries for the whole
// host) cannot hold the entries of one full bridge network of running sandboxes, which then caps how many a host
// runs well far below MaxBridgePorts. gcThresh3 <= 0 (unknown) gives none. The gateway never changes a host's
// sysctls itself: the operator raises the limit (docs/lifecycle.md, "Density").
func CheckNeighbourTable(gcThresh3 int) string {
	need := neighbourEntriesPerSandbox * MaxBridgePorts
	if gcThresh3 <= 0 || gcThresh3 >= need {
		return ""
	}
	return fmt.Sprintf("the host's IPv4 neighbour table holds at most %d entries (net.ipv4.neigh.default.gc_thresh3), for every "+
		"network namespace together, and each running sandbox on a bridge network takes %d: past about %d running sandboxes "+
		"(fewer beside other containers) the kernel logs \"neighbor table overflow\" and new sandboxes' connections stall "+
		"for seconds, so creates slow to one every few seconds; one full network needs %d. Raise it on the host: "+
		"sysctl -w net.ipv4.neigh.default.gc_thresh2=%d net.ipv4.neigh.default.gc_thresh3=%d (and persist it in /etc/sysctl.d)",
		gcThresh3, neighbourEntriesPerSandbox, gcThresh3/neighbourEntriesPerSandbox, need,
		suggestedNeighbourThresh2, suggestedNeighbourThresh3)
}

// neighbourLimit reads gc_thresh3 of this host, or 0 when it cannot (not Linux, no /proc).
func neighbourLimit() int {
	b, err := os.ReadFile(neighbourLimitPath)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}
