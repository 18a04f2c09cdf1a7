package driver

import (
	"fmt"
	"net/netip"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
)

// The driver's own keys and data names, beside kubenames' mapping of the Manager's names and labels.
const (
	// annoStopping marks a Pod the driver deletes on purpose: its end is no death.
	annoStopping = kubenames.Prefix + "stopping"
	// labelContainer selects one container record's Pod (the NetworkPolicy's pod selector).
	labelContainer = kubenames.Prefix + "container"
	// podKey is the container record's data key holding the Pod as JSON.
	podKey = "pod.json"
)

func parseCIDR(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address or CIDR")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
