package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The address policy for traffic a sandbox sends directly (not through the egress proxy) is a set of packet-filter
// rules on the host, keyed by the Linux bridge interface of each network sandboxes join. Docker gives user chains
// one hook before its own forwarding rules (DOCKER-USER, in FORWARD); traffic to the host itself never crosses
// FORWARD, so INPUT gets a chain of ours too. Every rule names its interface and carries a comment, so installing
// is idempotent (check, then add) and a network's rules can be found and removed.
const (
	chainForward = "SANDGATE-FWD"
	chainInput   = "SANDGATE-IN"
	commentTag   = "sandgate:"
	// bridgeNameOption fixes the Linux interface name of a network Docker creates.
	bridgeNameOption = "com.docker.network.bridge.name"
	iccOption        = "com.docker.network.bridge.enable_icc"
)

// BlockedDestinations are the addresses no sandbox may reach directly, on any network: link-local (which holds
// every cloud's instance metadata service at 169.254.169.254), AWS's IPv6 metadata address, Alibaba Cloud's
// metadata address, and IPv6 link-local.
var BlockedDestinations = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("fe80::/10"),
}

// NetworkPolicy is what the packet filter enforces for one bridge interface.
type NetworkPolicy struct {
	// Interface is the Linux bridge of the network.
	Interface string
	// Isolate drops traffic between two containers of the network: sandboxes never reach each other directly.
	Isolate bool
	// HostAllow are the host addresses and TCP ports a sandbox may open connections to (the egress proxy). Every
	// other new connection from the network to the host itself is dropped.
	HostAllow []netip.AddrPort
}

// rule is one packet-filter rule: its chain, whether it goes first (allows) or last (drops), and its match.
type rule struct {
	v6    bool
	chain string
	first bool
	args  []string
}

// rules are the packet-filter rules of a policy, for iptables and ip6tables.
func (p NetworkPolicy) rules() []rule {
	tag := []string{"-m", "comment", "--comment", commentTag + p.Interface}
	var out []rule
	for _, v6 := range []bool{false, true} {
		if p.Isolate {
			out = append(out, rule{v6: v6, chain: chainForward, args: append([]string{"-i", p.Interface, "-o", p.Interface}, append(tag, "-j", "DROP")...)})
		}
		for _, dst := range BlockedDestinations {
			if dst.Addr().Is6() != v6 {
				continue
			}
			out = append(out, rule{v6: v6, chain: chainForward, args: append([]string{"-i", p.Interface, "-d", dst.String()}, append(tag, "-j", "DROP")...)})
		}
		// Replies to what the host opened (the gateway's requests to the agents) come back in through INPUT.
		out = append(out, rule{v6: v6, chain: chainInput, first: true,
			args: append([]string{"-i", p.Interface, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED"}, append(tag, "-j", "RETURN")...)})
		for _, ap := range p.HostAllow {
			if ap.Addr().Is6() != v6 {
				continue
			}
			out = append(out, rule{v6: v6, chain: chainInput, first: true,
				args: append([]string{"-i", p.Interface, "-d", ap.Addr().String(), "-p", "tcp", "--dport", strconv.Itoa(int(ap.Port()))}, append(tag, "-j", "RETURN")...)})
		}
		out = append(out, rule{v6: v6, chain: chainInput, args: append([]string{"-i", p.Interface}, append(tag, "-j", "DROP")...)})
	}
	return out
}

// bridgeName is the interface name the driver gives a network it creates: short (the kernel allows 15 bytes),
// stable across restarts, and recognisable.
func bridgeName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return "sg" + hex.EncodeToString(sum[:])[:12]
}

// proxyAddr is the host address and port of an egress proxy URL, when it names an address literally.
func proxyAddr(raw string) (netip.AddrPort, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return netip.AddrPort{}, false
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	a, err := netip.ParseAddr(host)
	n, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(n)), true
}

// ErrPacketFilter is returned (wrapped) when the host's packet filter cannot be programmed: a sandbox that would
// bypass the address policy is not started.
var ErrPacketFilter = errors.New("the packet filter could not be programmed")

// packetFilter programs iptables and ip6tables. One mutex serialises this process's changes, a lock file other
// gateways' (netpolicy_lock.go), and the -w flag waits for iptables-legacy users such as Docker.
type packetFilter struct {
	mu sync.Mutex
	// lockPath is the host-wide lock file; empty in unit tests, which share no host.
	lockPath string
	// run executes one iptables or ip6tables command; tests may replace it.
	run func(ctx context.Context, v6 bool, args ...string) (string, error)
}

func newPacketFilter() *packetFilter {
	return &packetFilter{lockPath: hostLockPath, run: func(ctx context.Context, v6 bool, args ...string) (string, error) {
		bin := "iptables"
		if v6 {
			bin = "ip6tables"
		}
		out, err := exec.CommandContext(ctx, bin, append([]string{"-w", "-t", "filter"}, args...)...).CombinedOutput()
		return string(out), err
	}}
}

// hooks are where our chains are jumped to from: DOCKER-USER for forwarded traffic (Docker evaluates it before its
// own accepts; ip6tables has no DOCKER-USER on engines without IPv6 iptables support, so FORWARD itself) and INPUT.
func (f *packetFilter) ensureChains(ctx context.Context, v6 bool) error {
	for _, c := range []string{chainForward, chainInput} {
		if out, err := f.run(ctx, v6, "-N", c); err != nil && !strings.Contains(out, "exists") {
			return fmt.Errorf("%w: creating chain %s: %v %s", ErrPacketFilter, c, err, strings.TrimSpace(out))
		}
	}
	fwdHook := "DOCKER-USER"
	if _, err := f.run(ctx, v6, "-S", fwdHook); err != nil {
		fwdHook = "FORWARD"
	}
	for _, h := range [][2]string{{fwdHook, chainForward}, {"INPUT", chainInput}} {
		if _, err := f.run(ctx, v6, "-C", h[0], "-j", h[1]); err == nil {
			continue
		}
		if out, err := f.run(ctx, v6, "-I", h[0], "1", "-j", h[1]); err != nil {
			return fmt.Errorf("%w: hooking %s into %s: %v %s", ErrPacketFilter, h[1], h[0], err, strings.TrimSpace(out))
		}
	}
	return nil
}

// Apply installs a policy's rules that are missing. IPv6 rules are best effort when the host has no ip6tables.
// Another process changing the rule set at the same moment (Docker, another gateway) can fail a command under the
// nftables backend, where -w does not serialise: every step is idempotent, so Apply tries again a few times.
func (f *packetFilter) Apply(ctx context.Context, p NetworkPolicy) error {
	unlock, err := f.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for attempt := range applyAttempts {
		if err = f.applyLocked(ctx, p); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	return err
}

const applyAttempts = 5

// lock serialises a change with this process's others and, through the lock file, with other gateways on the host.
func (f *packetFilter) lock(ctx context.Context) (func(), error) {
	f.mu.Lock()
	if f.lockPath == "" {
		return f.mu.Unlock, nil
	}
	release, err := lockHost(ctx, f.lockPath)
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	return func() { release(); f.mu.Unlock() }, nil
}

func (f *packetFilter) applyLocked(ctx context.Context, p NetworkPolicy) error {
	v6ok := true
	if err := f.ensureChains(ctx, false); err != nil {
		return err
	}
	if err := f.ensureChains(ctx, true); err != nil {
		v6ok = false
	}
	for _, r := range p.rules() {
		if r.v6 && !v6ok {
			continue
		}
		if _, err := f.run(ctx, r.v6, append([]string{"-C", r.chain}, r.args...)...); err == nil {
			continue
		}
		args := append([]string{"-A", r.chain}, r.args...)
		if r.first {
			args = append([]string{"-I", r.chain, "1"}, r.args...)
		}
		if out, err := f.run(ctx, r.v6, args...); err != nil {
			if r.v6 {
				// Sandbox networks carry no routed IPv6 (only link-local on the bridge): the IPv6 rules are defence
				// in depth, and ip6tables-nft fails under concurrent rule changes; IPv4 is the policy that holds.
				v6ok = false
				continue
			}
			return fmt.Errorf("%w: %v %s", ErrPacketFilter, err, strings.TrimSpace(out))
		}
	}
	return nil
}

// Remove deletes every rule tagged with iface.
func (f *packetFilter) Remove(ctx context.Context, iface string) error {
	unlock, err := f.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return f.removeLocked(ctx, func(tagged string) bool { return tagged == iface })
}

// Sweep deletes the rules of interfaces that no longer exist (networks removed while no gateway watched).
func (f *packetFilter) Sweep(ctx context.Context) error {
	unlock, err := f.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return f.removeLocked(ctx, func(tagged string) bool { return !interfaceExists(tagged) })
}

func (f *packetFilter) removeLocked(ctx context.Context, match func(iface string) bool) error {
	var errs []error
	for _, v6 := range []bool{false, true} {
		for _, c := range []string{chainForward, chainInput} {
			out, err := f.run(ctx, v6, "-S", c)
			if err != nil {
				continue // no chain: nothing of ours there
			}
			for _, line := range strings.Split(out, "\n") {
				iface, ok := taggedInterface(line)
				if !ok || !match(iface) {
					continue
				}
				// -S quotes the comment; our comments hold no spaces, so the fields are the arguments unquoted.
				args := strings.Fields(strings.Replace(line, "-A "+c, "-D "+c, 1))
				for i := range args {
					args[i] = strings.Trim(args[i], `"`)
				}
				if o, err := f.run(ctx, v6, args...); err != nil {
					errs = append(errs, fmt.Errorf("%w: %s: %v %s", ErrPacketFilter, line, err, strings.TrimSpace(o)))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// interfaceExists reports whether this host (the gateway's network namespace) has a network interface of that
// name. On Linux it looks the one name up in /sys/class/net: net.InterfaceByName reads the kernel's whole list of
// interfaces, and a host with n sandboxes has a veth for each (O(n) per call, asked on every create and start).
func interfaceExists(name string) bool {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return false
	}
	if _, err := os.Stat(sysClassNet); err == nil {
		_, err := os.Stat(sysClassNet + "/" + name)
		return err == nil
	}
	_, err := net.InterfaceByName(name)
	return err == nil
}

// sysClassNet lists the network interfaces of the namespace that mounted it (the host's, for a gateway beside
// the engine).
const sysClassNet = "/sys/class/net"

// taggedInterface finds the interface named in a rule's comment, as iptables -S prints it.
func taggedInterface(line string) (string, bool) {
	_, rest, ok := strings.Cut(line, "--comment ")
	if !ok {
		return "", false
	}
	rest = strings.Trim(strings.Fields(rest)[0], `"`)
	iface, ok := strings.CutPrefix(rest, commentTag)
	if !ok || iface == "" {
		return "", false
	}
	return iface, true
}
