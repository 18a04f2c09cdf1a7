package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandgate/sandgate/sandboxes"
)

// Network holders take the engine's network set-up off a cold create's path. On Docker 20.10 a container that
// joins a user-defined network waits for its veth, its address and the embedded resolver (about ten iptables
// processes in its namespace): most of a `docker run`, and the reason a sandbox on its own isolated network started
// slower than `docker run` on the default bridge (docs/lifecycle.md, "Network spares"). A holder is a container
// that only sleeps on the sandbox's network, made ahead of need; a sandbox created with `--network container:<the
// holder>` joins the namespace as it is, and starts in about half the time of a `docker run`.
//
// A holder serves one sandbox for its whole life: it is taken once, stays running while its sandbox is stopped (so
// the sandbox starts again without the set-up either), and is removed with it. Spares nobody took are removed at
// Close; those a dead gateway left are swept by the Manager like any orphan (labelHolder, ContainerState.JoinedTo).
// The spares are refilled in the background after a start, not beside it: their set-up would take CPU from it.

// holderMemory caps a holder: docker-init and sleep use well under 1 MiB.
const holderMemory = 16 << 20

type netHolders struct {
	mu      sync.Mutex
	spare   map[string][]string // holderKey -> running holders nobody joined, oldest first
	filling map[string]bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newNetHolders() *netHolders {
	ctx, cancel := context.WithCancel(context.Background())
	return &netHolders{spare: map[string][]string{}, filling: map[string]bool{}, ctx: ctx, cancel: cancel}
}

// usesHolders reports whether spec's sandbox joins a network holder when one is spare.
func usesHolders(spec sandboxes.ContainerSpec) bool {
	// Not under another runtime (gVisor keeps a network stack of its own, set up from the namespace it starts in;
	// profile validation refuses network_spares with any runtime but runc).
	return spec.Profile.NetworkSpares > 0 && spec.HolderLabels != nil && spec.AgentSocketDir == "" &&
		spec.Profile.ConnectMode != sandboxes.ConnectHostPort && spec.Network != sandboxes.NetworkNone &&
		(spec.Profile.Runtime == "" || spec.Profile.Runtime == "runc")
}

// holderKey is what spares are kept by: the network, and the profile's host aliases (profile_ship.go), which a
// sandbox that joins a holder takes from its hosts file (the engine refuses them beside a joined network mode).
func holderKey(spec sandboxes.ContainerSpec) string {
	if len(spec.Profile.HostAliases) == 0 {
		return spec.Network
	}
	return spec.Network + " " + strings.Join(spec.Profile.HostAliases, ",")
}

// SpareHolders is how many network holders of network (for sandboxes without host aliases) are made and waiting.
func (d *Driver) SpareHolders(network string) int {
	d.holders.mu.Lock()
	defer d.holders.mu.Unlock()
	return len(d.holders.spare[network])
}

// takeHolder returns a running spare holder of key (holderKey), now the caller's, or "" when there is none.
func (d *Driver) takeHolder(ctx context.Context, key string) string {
	for {
		h := d.holders
		h.mu.Lock()
		list := h.spare[key]
		if len(list) == 0 {
			h.mu.Unlock()
			return ""
		}
		id := list[0]
		h.spare[key] = list[1:]
		h.mu.Unlock()
		// A spare can be gone (the orphan sweep of a gateway that took this one for dead, an operator's rm).
		if info, err := d.cli.ContainerInspect(ctx, id); err == nil && info.State != nil && info.State.Running {
			return id
		}
		d.removeHolder(id)
	}
}

// refillHolders makes spares for spec's network, one at a time in the background, until the profile's count is
// waiting.
func (d *Driver) refillHolders(spec sandboxes.ContainerSpec) {
	h := d.holders
	key := holderKey(spec)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.filling[key] || len(h.spare[key]) >= spec.Profile.NetworkSpares || h.ctx.Err() != nil {
		return
	}
	h.filling[key] = true
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			id, err := d.makeHolder(h.ctx, spec)
			h.mu.Lock()
			if err != nil || h.ctx.Err() != nil {
				h.filling[key] = false
				h.mu.Unlock()
				if err != nil && h.ctx.Err() == nil {
					slog.Warn("making a network holder", "network", spec.Network, "error", err)
				}
				if id != "" {
					d.removeHolder(id)
				}
				return
			}
			h.spare[key] = append(h.spare[key], id)
			done := len(h.spare[key]) >= spec.Profile.NetworkSpares
			if done {
				h.filling[key] = false
			}
			h.mu.Unlock()
			if done {
				return
			}
		}
	}()
}

// makeHolder creates and starts one holder on spec's network, hardened like a sandbox, and returns its id (also
// when its start failed, and its name when its create failed, for the caller to remove).
func (d *Driver) makeHolder(ctx context.Context, spec sandboxes.ContainerSpec) (string, error) {
	image := spec.Image
	if spec.AgentImage != "" {
		image = spec.AgentImage // the image may have no sleep; ours has
	}
	cfg := &container.Config{
		Image: image, User: SandboxUser, Hostname: "sandbox", Labels: spec.HolderLabels,
		Entrypoint: []string{"sleep", "infinity"}, Cmd: []string{},
		Healthcheck: noHealthcheck(),
	}
	yes := true
	pids := int64(8)
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(spec.Network), DNS: resolvers(spec.Profile),
		CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges:true"}, Init: &yes, ReadonlyRootfs: true,
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
		Resources: container.Resources{Memory: holderMemory, MemorySwap: holderMemory, NanoCPUs: 1e8, PidsLimit: &pids},
	}
	for _, a := range spec.Profile.HostAliases { // the hosts file its sandbox will take (holderKey)
		hc.ExtraHosts = append(hc.ExtraHosts, a+":127.0.0.1")
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := spec.Network + "-holder-" + hex.EncodeToString(suffix)
	created, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		// A create cut short (Close cancels the refills) may have made the container all the same; the caller
		// removes it by name, or it would stay behind, created and never started, where no sweep of this gateway's
		// looks again.
		return name, fmt.Errorf("creating a holder: %w", err)
	}
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return created.ID, fmt.Errorf("starting holder %s: %w", created.ID, err)
	}
	return created.ID, nil
}

// joinHolder points a sandbox's configuration at holder: the holder has the network, its address, its resolver
// setting and the hostname, which the engine refuses beside a joined network mode.
func joinHolder(cfg *container.Config, hc *container.HostConfig, holder string) {
	hc.NetworkMode = container.NetworkMode("container:" + holder)
	hc.DNS = nil
	hc.ExtraHosts = nil // the holder's hosts file has them (holderKey)
	cfg.Hostname = ""
	cfg.ExposedPorts = nil
}

// holderOf is the holder a container joined, from its inspect, or "".
func holderOf(info container.InspectResponse) string {
	if info.HostConfig == nil || !info.HostConfig.NetworkMode.IsContainer() {
		return ""
	}
	return info.HostConfig.NetworkMode.ConnectedContainer()
}

// retryWithHolder handles a start the engine refused (startErr) for a container that joined a holder. A holder
// that is not running (an engine restart stops both) is started, then the container. A holder that is gone (an
// operator removed it) leaves a container that can never start again: it is removed, and the error wraps
// sandboxes.ErrContainerNotFound so that the Manager makes a new one on the same workspace. Any other refusal is
// returned as it was.
func (d *Driver) retryWithHolder(ctx context.Context, containerID string, startErr error) error {
	info, err := d.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		return startErr
	}
	holder := holderOf(info)
	if holder == "" {
		return startErr
	}
	hinfo, err := d.cli.ContainerInspect(ctx, holder)
	switch {
	case cerrdefs.IsNotFound(err):
		if rerr := d.cli.ContainerRemove(ctx, containerID, container.RemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			return fmt.Errorf("removing container %s, whose network holder %s is gone: %w", containerID, holder, rerr)
		}
		return fmt.Errorf("%w: its network holder %s is gone (%v)", sandboxes.ErrContainerNotFound, holder, startErr)
	case err == nil && hinfo.State != nil && !hinfo.State.Running:
		if err := d.cli.ContainerStart(ctx, holder, container.StartOptions{}); err != nil {
			return fmt.Errorf("starting network holder %s: %w", holder, err)
		}
		return d.cli.ContainerStart(ctx, containerID, container.StartOptions{})
	}
	return startErr
}

// removeHolder removes a holder (and its sandbox's membership of the network with it).
func (d *Driver) removeHolder(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		slog.Warn("removing a network holder", "container", id, "error", err)
	}
}

// closeHolders stops the refills and removes the spares.
func (d *Driver) closeHolders() {
	h := d.holders
	h.cancel()
	h.wg.Wait()
	h.mu.Lock()
	var ids []string
	for _, list := range h.spare {
		ids = append(ids, list...)
	}
	h.spare = map[string][]string{}
	h.mu.Unlock()
	for _, id := range ids {
		d.removeHolder(id)
	}
}
