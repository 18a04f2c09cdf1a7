// Package docker is the sandboxes.Driver for one Docker engine, through the Engine API. It applies the hardening
// every sandbox gets (non-root, no capabilities, no-new-privileges, read-only root with sized tmpfs, memory without
// swap, CPU and PID limits, init, capped logs) and nothing else: every lifecycle decision belongs to the Manager.
package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// SandboxUser is the uid:gid every sandbox runs as (the images' `sandbox` user).
const SandboxUser = "65532:65532"

// InternalDNS is the only upstream the embedded resolver of an internal sandbox has: the sandbox's own loopback.
const InternalDNS = "127.0.0.1"

// Defaults for profiles that leave a resource unset.
const (
	DefaultMemory   = 1 << 30
	DefaultCPUs     = 1.0
	DefaultPids     = 512
	DefaultDisk     = 256 << 20
	browserShmBytes = 256 << 20
)

// Driver talks to one Docker engine.
type Driver struct {
	// freezers are the containers' freezers once found (an engine inspect and a read of /proc), so pausing and
	// resuming a known container costs no engine call; a container keeps its cgroup across stop and start (pause.go).
	freezers perContainer[cgroupFreezer]
	mounts   mountCache // snapshot.go
	// caps are where capped workspaces' images and loop links live; attachMu serialises attaching them
	// (workspace_cap.go).
	caps     capDirs
	attachMu sync.Mutex
	// cpu holds each container's previous CPU sample until it is removed (usage.go); stats where its usage is read
	// from, once found (usage_cgroup.go).
	cpu   perContainer[cpuSample]
	stats perContainer[cgroupStats]

	cli    *client.Client
	host   string
	filter *packetFilter

	// agentVolumes are the agent volumes this driver filled (inject.go).
	agentMu      sync.Mutex
	agentVolumes map[string]bool
	// policed remembers containers whose network policy Create just verified, so the Start that follows a
	// cold create does not program the packet filter a second time (each check is an iptables process, and
	// they are serialised: on a busy host this was most of a cold create's overhead over `docker run`).
	policedMu sync.Mutex
	policed   map[string]time.Time
	// holders are the network namespaces made ahead for profiles with network spares (netholder.go).
	holders *netHolders
	// ifaces are the Linux bridges of the networks sandboxes joined, by network name (networkInterface).
	ifaceMu sync.Mutex
	ifaces  map[string]string
	// identities are the passwd and group files of images whose sandboxes name their user (identity.go).
	identities identities
}

// policedFresh is how long a Create's verification stands in for its Start's.
const policedFresh = 5 * time.Second

// New makes a driver for host (empty: DOCKER_HOST or the default socket). It does no I/O.
func New(host string) (*Driver, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Driver{cli: cli, host: host, filter: newPacketFilter(), policed: map[string]time.Time{}, holders: newNetHolders(),
		ifaces: map[string]string{}}, nil
}

// Client is the underlying Engine API client (tests use it to inspect what the driver made).
func (d *Driver) Client() *client.Client { return d.cli }

// EnsureNetwork creates a bridge network of the gateway's own if name does not exist: internal (no route out) or
// with egress, its bridge interface named after it, containers unable to reach each other (ICC off), and the
// address policy installed for it (netpolicy.go). An existing network of that name must be internal when asked
// for internal. The policy is installed again every time: the packet filter may have been flushed since.
func (d *Driver) EnsureNetwork(ctx context.Context, name string, internal bool, labels map[string]string) error {
	nw, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	switch {
	case err == nil:
		if internal && !nw.Internal {
			return fmt.Errorf("network %s exists but is not internal; sandboxes would get egress", name)
		}
	case !cerrdefs.IsNotFound(err):
		return err
	default:
		_, err = d.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: internal, Labels: labels,
			Options: map[string]string{bridgeNameOption: bridgeName(name), iccOption: "false"}})
		if err != nil && !cerrdefs.IsConflict(err) {
			return err
		}
	}
	if err := d.filter.Sweep(ctx); err != nil {
		return err
	}
	_, err = d.applyPolicy(ctx, name, nil, true)
	return err
}

// networkInterface is the Linux bridge of a network, and whether sandgate can police it (a bridge network).
//
// The answer is kept per network once its interface is on this host: every create and every start asks, and the
// engine's inspect of a network lists every container on it (O(n) per create: 3 ms at 20 sandboxes, 57 ms at
// 1000 on one network, measured 2026-11-28). A network's bridge does not change while the network exists; one
// removed, or made again under the same name (a new id, so a new `br-` interface unless its name is fixed), leaves
// no interface of the kept name, and the next call asks the engine again.
func (d *Driver) networkInterface(ctx context.Context, name string) (string, error) {
	d.ifaceMu.Lock()
	iface, ok := d.ifaces[name]
	d.ifaceMu.Unlock()
	if ok && interfaceExists(iface) {
		return iface, nil
	}
	nw, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspecting network %s: %w", name, err)
	}
	if nw.Driver != "bridge" {
		return "", fmt.Errorf("network %s uses the %s driver; sandgate enforces its address policy only on bridge networks", name, nw.Driver)
	}
	iface = nw.Options[bridgeNameOption]
	if iface == "" {
		if len(nw.ID) < 12 {
			return "", fmt.Errorf("network %s has no usable id", name)
		}
		iface = "br-" + nw.ID[:12]
	}
	if interfaceExists(iface) {
		d.ifaceMu.Lock()
		d.ifaces[name] = iface
		d.ifaceMu.Unlock()
	}
	return iface, nil
}

// forgetInterface drops what networkInterface kept for a network.
func (d *Driver) forgetInterface(name string) {
	d.ifaceMu.Lock()
	delete(d.ifaces, name)
	d.ifaceMu.Unlock()
}

// applyPolicy installs the address policy of a network sandboxes join. isolate is true for the gateway's own
// networks (sandboxes reach no other container); an operator's named network keeps its members' own traffic.
func (d *Driver) applyPolicy(ctx context.Context, name string, allow []netip.AddrPort, isolate bool) (NetworkPolicy, error) {
	iface, err := d.networkInterface(ctx, name)
	if err != nil {
		return NetworkPolicy{}, err
	}
	// Rules for an interface this host does not have would police nothing (an engine on another host).
	if !interfaceExists(iface) {
		return NetworkPolicy{}, fmt.Errorf("%w: network %s's bridge %s is not on this host (the gateway must run beside the engine)", ErrPacketFilter, name, iface)
	}
	p := NetworkPolicy{Interface: iface, Isolate: isolate, HostAllow: allow}
	return p, d.filter.Apply(ctx, p)
}

// policeSpec installs the policy of the network spec joins, allowing its egress proxy and mirrors, before the container is
// created or started: a sandbox never runs on a network without it.
func (d *Driver) policeSpec(ctx context.Context, spec sandboxes.ContainerSpec) error {
	if err := checkNetworkMode(spec); err != nil || spec.Network == sandboxes.NetworkNone {
		return err
	}
	// The host endpoints the operator named for the profile (its egress proxy, its package mirrors) stay
	// reachable when they are given as addresses; the rest of the host does not.
	var allow []netip.AddrPort
	endpoints := []string{spec.Profile.NPMRegistry, spec.Profile.PyPIIndexURL, spec.Profile.AptMirror, spec.Profile.CRANMirror}
	if e := spec.Profile.Egress; e != nil {
		endpoints = append(endpoints, e.Proxy)
	}
	for _, u := range endpoints {
		if ap, ok := proxyAddr(u); ok {
			allow = append(allow, ap)
		}
	}
	own := spec.Profile.Network == "" || spec.Profile.Network == sandboxes.NetworkInternal || spec.Profile.Network == sandboxes.NetworkBridge
	_, err := d.applyPolicy(ctx, spec.Network, allow, own)
	return err
}

// checkNetworkMode refuses, without any I/O, a network that cannot carry the address policy.
func checkNetworkMode(spec sandboxes.ContainerSpec) error {
	switch spec.Network {
	case sandboxes.NetworkNone:
		return nil
	case "host", "default", sandboxes.NetworkBridge:
		return fmt.Errorf("network %q cannot carry sandgate's address policy; use internal, bridge (the gateway's own) or a named bridge network", spec.Network)
	}
	if strings.HasPrefix(spec.Network, "container:") {
		return fmt.Errorf("network %q shares another container's network; refused", spec.Network)
	}
	return nil
}

// CreateVolume creates a named local volume. One engine call: the engine answers the create of an existing local
// volume with that volume, unchanged. Labels carrying a workspace size (sandboxes.WorkspaceSizeOf) make a capped
// volume instead (workspace_cap.go).
func (d *Driver) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	if size := sandboxes.WorkspaceSizeOf(labels); size > 0 {
		_, err := d.createCapped(ctx, name, labels, size)
		return err
	}
	v, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: labels})
	if err == nil {
		d.mounts.Store(name, v.Mountpoint)
	}
	return err
}

// RemoveVolume removes a volume; a missing one is fine. A capped volume's loop device, link and image go once the
// engine let the volume go (an in-use volume keeps them), and also when the engine had no such volume: what a
// create that failed half-way left.
func (d *Driver) RemoveVolume(ctx context.Context, name string) error {
	d.mounts.Delete(name)
	err := d.cli.VolumeRemove(ctx, name, false)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	if err := d.dropCapped(ctx, name); err != nil {
		return fmt.Errorf("removing the image of workspace %s: %w", name, err)
	}
	return nil
}

// HostConfig is the hardened host configuration of a sandbox container.
func HostConfig(spec sandboxes.ContainerSpec) (*container.HostConfig, error) {
	p := spec.Profile
	mem := int64(DefaultMemory)
	if p.Resources.Memory != "" {
		v, err := sandboxes.ParseBytes(p.Resources.Memory)
		if err != nil {
			return nil, err
		}
		mem = v
	}
	disk := int64(DefaultDisk)
	if p.Resources.Disk != "" {
		v, err := sandboxes.ParseBytes(p.Resources.Disk)
		if err != nil {
			return nil, err
		}
		disk = v
	}
	cpus := p.Resources.CPUs
	if cpus == 0 {
		cpus = DefaultCPUs
	}
	pids := p.Resources.Pids
	if pids == 0 {
		pids = DefaultPids
	}
	yes := true
	tmpfsOpts := "rw,exec,nosuid,nodev,size=" + strconv.FormatInt(disk, 10)
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(spec.Network),
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"},
		Privileged:  false,
		Init:        &yes,
		// A profile's writable_root is the one explicit relaxation, for images that write to /etc or /var.
		ReadonlyRootfs: !p.WritableRoot,
		Tmpfs: map[string]string{
			"/tmp":                tmpfsOpts + ",mode=1777",
			sandboxes.SandboxHome: tmpfsOpts + fmt.Sprintf(",uid=%d,gid=%d,mode=0700", p.UID(), p.UID()),
		},
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: spec.Volume, Target: "/workspace"}},
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": "10m", "max-file": "1",
		}},
		Resources: container.Resources{
			Memory: mem, MemorySwap: mem, NanoCPUs: int64(cpus * 1e9), PidsLimit: &pids,
			Ulimits: []*container.Ulimit{{Name: "nofile", Soft: 4096, Hard: 8192}},
		},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		// AutoRemove stays off: a dead container is kept until its exit state has been read.
		AutoRemove: false,
		Runtime:    p.Runtime,
	}
	if p.HasCapability(sandboxes.CapBrowser) {
		hc.ShmSize = browserShmBytes
	}
	hc.DNS = resolvers(p)
	for _, a := range p.HostAliases { // names of the sandbox itself (Ship's `ship`, profile_ship.go)
		hc.ExtraHosts = append(hc.ExtraHosts, a+":127.0.0.1")
	}
	for _, b := range spec.HostBinds {
		parts := strings.Split(b, ":")
		m := mount.Mount{Type: mount.TypeBind, Source: parts[0], Target: parts[1]}
		if len(parts) == 3 && parts[2] == "ro" {
			m.ReadOnly = true
		}
		hc.Mounts = append(hc.Mounts, m)
	}
	if spec.AgentSocketDir != "" {
		// The gateway's own directory, not a user bind: allow_host_binds does not govern it.
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: spec.AgentSocketDir, Target: sandboxes.SocketMountPoint})
	}
	if spec.ResolvConf != "" { // gVisor cannot reach the engine's embedded resolver (sandboxes/resolvconf.go)
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: spec.ResolvConf, Target: "/etc/resolv.conf", ReadOnly: true})
	}
	if p.ConnectMode == sandboxes.ConnectHostPort {
		hc.PortBindings = nat.PortMap{agentPort(spec): {{HostIP: "127.0.0.1", HostPort: ""}}}
	}
	return hc, nil
}

// resolvers is the upstream of a sandbox's embedded resolver, nil for the engine's default. Docker's embedded
// resolver answers the names of the network's containers itself and forwards every other name to the host's
// resolvers, from the host's own namespace when those are loopback addresses: a sandbox with no route out could
// still leak data in the names it looks up. On the internal network its only upstream is the sandbox's own
// loopback, so a looked-up name never leaves the sandbox.
func resolvers(p sandboxes.Profile) []string {
	if p.Network == "" || p.Network == sandboxes.NetworkInternal {
		return []string{InternalDNS}
	}
	return nil
}

// noHealthcheck turns off the image's HEALTHCHECK. The gateway probes each agent itself over its kept connection
// and reads nothing from the engine's health status, while the engine would run the check as a process in every
// container at the image's interval (ours: every 10 s): with 300 idle sandboxes that is 30 container execs a
// second, enough to keep this 2-core host busy with nothing to do (docs/lifecycle.md, "Density").
func noHealthcheck() *container.HealthConfig { return &container.HealthConfig{Test: []string{"NONE"}} }

func agentPort(spec sandboxes.ContainerSpec) nat.Port {
	return nat.Port(strconv.Itoa(spec.AgentPort) + "/tcp")
}

// removeStale removes the container that holds spec's name when it was made for the same sandbox (it carries all of
// spec's labels) and never ran. A create whose answer was lost leaves one: the engine made the container, then was
// killed or its socket cut before it answered, so the sandbox's record never learnt the ID, and every later create
// of the sandbox would fail on the name (until the orphan sweep, minutes later). It reports whether it removed one.
func (d *Driver) removeStale(ctx context.Context, spec sandboxes.ContainerSpec) bool {
	info, err := d.cli.ContainerInspect(ctx, spec.Name)
	if err != nil || info.ContainerJSONBase == nil || info.State == nil || info.State.Status != "created" || info.Config == nil {
		return false
	}
	for k, v := range spec.Labels {
		if info.Config.Labels[k] != v {
			return false
		}
	}
	return d.cli.ContainerRemove(ctx, info.ID, container.RemoveOptions{Force: true}) == nil
}

// Create creates the sandbox's container with the hardened host configuration.
func (d *Driver) Create(ctx context.Context, spec sandboxes.ContainerSpec) (string, error) {
	hc, err := HostConfig(spec)
	if err != nil {
		return "", err
	}
	// Checked again here, against the socket this driver really talks to, with the host's links as they are now:
	// the configuration was validated against the default socket paths, possibly long ago.
	protected := append([]string{}, sandboxes.EngineSockets...)
	if sock, ok := strings.CutPrefix(d.cli.DaemonHost(), "unix://"); ok {
		protected = append(protected, sock)
	}
	for _, b := range spec.HostBinds {
		if err := sandboxes.CheckBindSource(strings.Split(b, ":")[0], protected); err != nil {
			return "", fmt.Errorf("bind %q: %w", b, err)
		}
	}
	// The network policy is verified beside the engine's create rather than before it: both take hundreds of
	// milliseconds on a busy host (the policy check runs iptables processes, one at a time host-wide), and a
	// created container is not yet running, so nothing reaches the network before the check is done. A container
	// whose check failed is removed before Create returns; a network that cannot be policed at all is refused first.
	if err := checkNetworkMode(spec); err != nil {
		return "", err
	}
	if err := d.attachMounts(ctx, spec); err != nil { // workspace_cap.go
		return "", err
	}
	if err := d.prepareIdentity(ctx, spec, hc); err != nil { // identity.go
		return "", err
	}
	policed := make(chan error, 1)
	go func() { policed <- d.policeSpec(ctx, spec) }()
	env := make([]string, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	cfg := &container.Config{
		Image:        spec.Image,
		User:         SandboxUser,
		Env:          env,
		Labels:       spec.Labels,
		Hostname:     "sandbox",
		ExposedPorts: nat.PortSet{agentPort(spec): struct{}{}},
		Healthcheck:  noHealthcheck(),
	}
	if u := spec.Profile.User; u != nil {
		cfg.User = fmt.Sprintf("%d:%d", u.UID, u.UID)
	}
	if spec.AgentImage != "" {
		if err := d.injectAgent(ctx, spec, cfg, hc); err != nil { // inject.go
			return "", err
		}
	}
	holder := ""
	if usesHolders(spec) {
		if holder = d.takeHolder(ctx, holderKey(spec)); holder != "" {
			joinHolder(cfg, hc, holder) // netholder.go
		}
	}
	created, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, spec.Name)
	if err != nil && cerrdefs.IsConflict(err) && d.removeStale(ctx, spec) {
		created, err = d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, spec.Name)
	}
	perr := <-policed
	if err != nil {
		if holder != "" {
			d.removeHolder(holder)
		}
		for _, m := range hc.Mounts {
			if m.Target == agentapi.HomeSeedDir {
				_ = d.removeHomeSeed(context.WithoutCancel(ctx), m.Source)
			}
		}
		if perr != nil {
			return "", perr
		}
		return "", err
	}
	if perr != nil {
		_ = d.Remove(context.WithoutCancel(ctx), created.ID)
		return "", perr
	}
	if spec.AgentImage != "" {
		if err := d.ownMounts(ctx, created.ID, spec); err != nil { // inject.go
			_ = d.Remove(context.WithoutCancel(ctx), created.ID)
			return "", err
		}
	}
	d.policedMu.Lock()
	now := time.Now()
	for id, at := range d.policed {
		if now.Sub(at) > policedFresh {
			delete(d.policed, id)
		}
	}
	d.policed[created.ID] = now
	d.policedMu.Unlock()
	return created.ID, nil
}

// Start starts the container (a running one is left as it is) and returns the agent's address.
func (d *Driver) Start(ctx context.Context, containerID string, spec sandboxes.ContainerSpec) (string, error) {
	d.policedMu.Lock()
	at, fresh := d.policed[containerID]
	delete(d.policed, containerID)
	d.policedMu.Unlock()
	if !fresh || time.Since(at) > policedFresh {
		if err := d.policeSpec(ctx, spec); err != nil {
			return "", err
		}
	}
	if err := d.attachMounts(ctx, spec); err != nil { // workspace_cap.go: a reboot detached every loop device
		return "", err
	}
	if err := d.ensureIdentity(ctx, spec); err != nil { // identity.go: a reboot emptied the gateway's /run
		return "", err
	}
	if usesHolders(spec) {
		defer d.refillHolders(spec) // after this start, not beside it (netholder.go)
	}
	err := d.cli.ContainerStart(ctx, containerID, container.StartOptions{})
	if err != nil {
		err = d.retryWithHolder(ctx, containerID, err) // netholder.go
	}
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("%w: %v", sandboxes.ErrContainerNotFound, err)
		}
		if bridgeFull(err) {
			return "", networkFull(spec.Network, err)
		}
		return "", err
	}
	info, err := d.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		return "", err
	}
	if info.State == nil || !info.State.Running {
		exited := &sandboxes.ExitedError{ExitCode: exitCode(info), At: time.Now()}
		if info.State != nil {
			exited.OOMKilled = info.State.OOMKilled
			if at, err := time.Parse(time.RFC3339Nano, info.State.FinishedAt); err == nil {
				exited.At = at
			}
		}
		return "", exited
	}
	if spec.AgentSocketDir != "" {
		return agentapi.UnixAddr(path.Join(spec.AgentSocketDir, sandboxes.AgentSocketName)), nil
	}
	if spec.Profile.ConnectMode == sandboxes.ConnectHostPort {
		for _, b := range info.NetworkSettings.Ports[agentPort(spec)] {
			if b.HostPort != "" {
				return "127.0.0.1:" + b.HostPort, nil
			}
		}
		return "", errors.New("the agent port was not published")
	}
	if holder := holderOf(info); holder != "" {
		// The address is the holder's: the sandbox joined its namespace.
		if info, err = d.cli.ContainerInspect(ctx, holder); err != nil {
			return "", fmt.Errorf("inspecting network holder %s: %w", holder, err)
		}
	}
	if info.NetworkSettings != nil {
		if ep := info.NetworkSettings.Networks[spec.Network]; ep != nil && ep.IPAddress != "" {
			return fmt.Sprintf("%s:%d", ep.IPAddress, spec.AgentPort), nil
		}
		// A container made before its profile's network was resolved differently (network bridge meant Docker's
		// default bridge) is still reached where it is.
		if len(info.NetworkSettings.Networks) == 1 {
			for _, ep := range info.NetworkSettings.Networks {
				if ep != nil && ep.IPAddress != "" {
					return fmt.Sprintf("%s:%d", ep.IPAddress, spec.AgentPort), nil
				}
			}
		}
	}
	return "", fmt.Errorf("container has no address on network %s", spec.Network)
}

func exitCode(info container.InspectResponse) int {
	if info.State == nil {
		return -1
	}
	return info.State.ExitCode
}

// Stop stops a container within grace, then kills it.
func (d *Driver) Stop(ctx context.Context, containerID string, grace time.Duration) error {
	d.thawBeforeStop(containerID)
	secs := int(grace.Seconds())
	err := d.cli.ContainerStop(ctx, containerID, container.StopOptions{Timeout: &secs})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

// Remove force-removes a container and its anonymous volumes (never named ones).
func (d *Driver) Remove(ctx context.Context, containerID string) error {
	d.thawBeforeStop(containerID)
	defer d.freezers.forget(containerID)
	defer d.cpu.forget(containerID)
	defer d.stats.forget(containerID)
	holder, seed := "", ""
	if info, err := d.cli.ContainerInspect(ctx, containerID); err == nil {
		holder, seed = holderOf(info), homeSeedOf(info.Mounts)
	}
	err := d.cli.ContainerRemove(ctx, containerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		if cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress") {
			return nil
		}
		return err
	}
	if holder != "" {
		d.removeHolder(holder) // its sandbox's alone (netholder.go)
	}
	if seed != "" {
		return d.removeHomeSeed(ctx, seed) // inject.go: a named volume, which RemoveVolumes leaves
	}
	return nil
}

// Close removes the spare network holders and closes the client; sandboxes' containers are untouched.
func (d *Driver) Close() error {
	d.closeHolders()
	return d.cli.Close()
}

var _ sandboxes.Driver = (*Driver)(nil)
