package sandboxes

import (
	"fmt"
	"strconv"
	"strings"
)

// Label keys, under the namespace: "<ns>.id" and so on.
const (
	labelManaged    = "managed"
	labelID         = "id"
	labelProfile    = "profile"
	labelOwner      = "owner"
	labelCreated    = "created"
	labelInstance   = "instance"
	labelGeneration = "generation"
	labelWorkspace  = "workspace"

	labelManagedWorkspace = "managed_workspace"
	// labelAgentVolume marks the read-only volumes that carry the agent into other images (profile_image.go).
	labelAgentVolume = "agent"
	// labelHolder marks a network holder (Profile.NetworkSpares): a container that only keeps a network namespace
	// for a sandbox to join. Its value is the network.
	labelHolder = "holder"
	// labelHomeSeed marks the read-only volume an injected image's HOME is seeded from (ContainerSpec.HomeSeedLabels),
	// one per container, which also carries its sandbox's labelID so the orphan sweep can tell whose it is.
	labelHomeSeed = "home_seed"
	// LabelWorkspaceSize, under the namespace, is a workspace volume's size limit in bytes: the driver caps the
	// volume it makes with these labels at that size (docker: a loop-backed filesystem; kubernetes: the claim's
	// request). Absent or 0: unlimited.
	LabelWorkspaceSize = "workspace_size"
)

// WorkspaceSizeOf is the size limit that volume labels carry (any namespace's LabelWorkspaceSize), 0 when none or
// when it does not parse as a positive count of bytes.
func WorkspaceSizeOf(labels map[string]string) int64 {
	for k, v := range labels {
		if k == LabelWorkspaceSize || strings.HasSuffix(k, "."+LabelWorkspaceSize) {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

func (m *Manager) label(key string) string { return m.mcfg.Namespace + "." + key }

// VolumeName is the Docker volume of a workspace id.
func (m *Manager) VolumeName(workspaceID string) string { return m.mcfg.Namespace + "-" + workspaceID }

// ContainerName is the Docker container name of a sandbox id.
func (m *Manager) ContainerName(id string) string { return m.mcfg.Namespace + "-" + id }

// InternalNetwork is the name of the namespace's internal (no egress) network.
func (m *Manager) InternalNetwork() string { return m.mcfg.Namespace + "-internal" }

// BridgeNetwork is the name of the namespace's network with egress, which profiles with network bridge join
// instead of Docker's default bridge: the gateway owns it, so it can enforce the address policy on it without
// touching other containers of the host.
func (m *Manager) BridgeNetwork() string { return m.mcfg.Namespace + "-bridge" }

func (m *Manager) networkFor(p Profile) string {
	switch p.Network {
	case "", NetworkInternal:
		return m.InternalNetwork()
	case NetworkBridge:
		return m.BridgeNetwork()
	default:
		return p.Network
	}
}

func (m *Manager) volumeLabels(rec Record) map[string]string {
	labels := map[string]string{
		m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelWorkspace): rec.WorkspaceID,
		// Only workspaces the Manager made are swept as orphans; one a caller named is theirs to keep.
		m.label(labelManagedWorkspace): fmt.Sprint(rec.ManagedWorkspace),
	}
	if rec.Spec != nil {
		if n := rec.Spec.Resources.WorkspaceBytes(); n > 0 {
			labels[m.label(LabelWorkspaceSize)] = strconv.FormatInt(n, 10)
		}
	}
	return labels
}

// sizedVolumeLabels is volumeLabels with a size limit of mb MiB (0: none): a workspace made on its own (Bay's
// cargo), with no profile behind it.
func (m *Manager) sizedVolumeLabels(rec Record, mb int) map[string]string {
	labels := m.volumeLabels(rec)
	if mb > 0 {
		// Bay allows 1 MiB; the smallest filesystem worth making is MinWorkspaceSize.
		labels[m.label(LabelWorkspaceSize)] = strconv.FormatInt(max(int64(mb)<<20, MinWorkspaceSize), 10)
	}
	return labels
}
