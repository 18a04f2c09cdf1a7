package sandboxes

import "fmt"

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
)

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
	return map[string]string{
		m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelWorkspace): rec.WorkspaceID,
		// Only workspaces the Manager made are swept as orphans; one a caller named is theirs to keep.
		m.label(labelManagedWorkspace): fmt.Sprint(rec.ManagedWorkspace),
	}
}
