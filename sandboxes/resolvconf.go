package sandboxes

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// A resolver for gVisor sandboxes on networks with direct egress. On a user-defined network (the gateway's bridge,
// an operator's named one) Docker writes 127.0.0.11 into the container's resolv.conf, its embedded resolver, which
// listens in the container's namespace on the host's side. A runsc sandbox's 127.0.0.11 is gVisor's own loopback,
// where nothing answers, so no name would resolve (docs/security.md "gVisor", TestGVisorMissesTheEmbeddedResolver).
// Such a sandbox gets a resolv.conf of the gateway's instead, naming the resolvers Docker's embedded resolver would
// forward to: the host's. Internal sandboxes keep Docker's (their names must not leave the sandbox), and runc
// sandboxes reach the embedded resolver as they are.

// resolvConfName is the file, in ManagerConfig.SocketDir, mounted at /etc/resolv.conf (no sandbox id has this
// form, so it never meets a socket directory).
const resolvConfName = "resolv.conf"

// systemdResolvConf lists the upstream resolvers when the host's own resolv.conf names only systemd-resolved's stub.
const systemdResolvConf = "/run/systemd/resolve/resolv.conf"

// needsOwnResolvConf says p's sandboxes cannot reach Docker's embedded resolver and have direct egress.
func needsOwnResolvConf(p Profile) bool {
	return p.Runtime == RuntimeGVisor && p.Network != "" && p.Network != NetworkInternal && p.Network != NetworkNone
}

// nameservers lists the nameserver addresses of a resolv.conf a sandbox can use: not loopback (the host's, out of
// a sandbox's reach), not unspecified, not link-local (the packet filter drops those), at most three (the
// resolver's own limit), in order. loopbackOnly says the file named nameservers and all were loopback.
func nameservers(conf []byte) (servers []string, loopbackOnly bool) {
	sc := bufio.NewScanner(bytes.NewReader(conf))
	sawLoopback := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		addr, err := netip.ParseAddr(fields[1])
		if err != nil || addr.Zone() != "" {
			continue
		}
		addr = addr.Unmap()
		switch {
		case addr.IsLoopback():
			sawLoopback = true
		case addr.IsUnspecified() || addr.IsLinkLocalUnicast() || addr.IsMulticast():
		case len(servers) < 3:
			servers = append(servers, addr.String())
		}
	}
	return servers, sawLoopback && len(servers) == 0
}

// writeResolvConf writes the resolv.conf for gVisor sandboxes with direct egress from the host's (hostConf, and
// systemd-resolved's upstream list when the host names only its stub) into dir, and returns its path. With no
// usable resolver it fails, saying so: the sandbox then starts with Docker's, where names do not resolve.
func writeResolvConf(dir, hostConf string) (string, error) {
	b, err := os.ReadFile(hostConf)
	if err != nil {
		return "", fmt.Errorf("reading the host's resolvers: %w", err)
	}
	servers, loopbackOnly := nameservers(b)
	if loopbackOnly {
		if b, err := os.ReadFile(systemdResolvConf); err == nil {
			servers, _ = nameservers(b)
		}
	}
	if len(servers) == 0 {
		return "", fmt.Errorf("%s names no resolver a sandbox can reach (only loopback or link-local ones)", hostConf)
	}
	var out strings.Builder
	out.WriteString("# written by sandgate for gVisor sandboxes: Docker's embedded resolver is out of their reach\n")
	for _, s := range servers {
		out.WriteString("nameserver " + s + "\n")
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	path := filepath.Join(dir, resolvConfName)
	tmp, err := os.CreateTemp(dir, ".resolv.conf.*")
	if err != nil {
		return "", fmt.Errorf("writing the sandboxes' resolv.conf: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if _, err := tmp.WriteString(out.String()); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing the sandboxes' resolv.conf: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing the sandboxes' resolv.conf: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("writing the sandboxes' resolv.conf: %w", err)
	}
	// A rename: a sandbox whose container holds the previous file keeps reading it whole.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("writing the sandboxes' resolv.conf: %w", err)
	}
	return path, nil
}

// resolvConfFor is the host file mounted at /etc/resolv.conf in p's sandboxes, "" for Docker's own. Written on
// every launch that needs it, so a change of the host's resolvers reaches the next sandbox started.
func (m *Manager) resolvConfFor(p Profile) string {
	if !needsOwnResolvConf(p) {
		return ""
	}
	path, err := writeResolvConf(m.mcfg.SocketDir, m.mcfg.HostResolvConf)
	if err != nil {
		m.log.Warn("a gVisor sandbox on a network with direct egress gets no resolver: names will not resolve in it",
			"profile", p.ID, "error", err)
		return ""
	}
	return path
}
