package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Driver is what the Manager needs from a container engine. It is deliberately small: the Manager owns every
// decision (ids, labels, hardening inputs, state); the driver turns a ContainerSpec into a container and reports
// what the engine sees. sandboxes/docker implements it.
type Driver interface {
	// Check verifies the engine answers and is safe to run sandboxes on. Warnings are logged; an error refuses start.
	Check(ctx context.Context) (warnings []string, err error)
	// EnsureNetwork creates the gateway's own network name if it does not exist: internal (no egress) or not,
	// sandboxes on it unable to reach each other or the host, and the direct-traffic address policy enforced.
	EnsureNetwork(ctx context.Context, name string, internal bool, labels map[string]string) error
	// CreateVolume creates the named volume if it does not exist.
	CreateVolume(ctx context.Context, name string, labels map[string]string) error
	// RemoveVolume removes a volume; a missing volume is not an error.
	RemoveVolume(ctx context.Context, name string) error
	// Create creates (does not start) a container and returns its engine id.
	Create(ctx context.Context, spec ContainerSpec) (containerID string, err error)
	// Start starts a created or stopped container and returns the agent's address (host:port) as the gateway
	// reaches it.
	Start(ctx context.Context, containerID string, spec ContainerSpec) (addr string, err error)
	// Stop stops a container, keeping it and its volume. A missing or stopped container is not an error.
	Stop(ctx context.Context, containerID string, grace time.Duration) error
	// Remove force-removes a container (not its named volume); a missing container is not an error.
	Remove(ctx context.Context, containerID string) error
	// Inspect reports a container's state; ErrContainerNotFound if it does not exist.
	Inspect(ctx context.Context, containerID string) (ContainerState, error)
	// List returns the containers carrying every label in match (values "" match any value).
	List(ctx context.Context, match map[string]string) ([]ContainerState, error)
	// ListVolumes returns the volumes carrying every label in match.
	ListVolumes(ctx context.Context, match map[string]string) ([]VolumeInfo, error)
	// Events streams container events (die, oom, destroy) of containers carrying the label key=value until ctx ends.
	// The error channel reports why the stream ended; the Manager resubscribes.
	Events(ctx context.Context, key, value string) (<-chan ContainerEvent, <-chan error)
	// Close releases the engine client. It never touches containers.
	Close() error
}

// UsageDriver is what a Driver offers when its engine reports containers' resource use. The Manager asks for it
// with a type assertion, as for PauseDriver, so an engine without it keeps working and its sandboxes show no usage.
type UsageDriver interface {
	// Usage samples a running container's memory, and its CPU use since the previous Usage call for the same
	// container (nil on the first). A missing container is ErrContainerNotFound.
	Usage(ctx context.Context, containerID string) (Usage, error)
}

// Usage is a running sandbox's resource use.
type Usage struct {
	// CPUPercent is of one core, over the time since the previous sample; nil until two samples exist.
	CPUPercent *float64 `json:"cpu_percent,omitempty"`
	// MemoryBytes leaves out the page cache, as `docker stats` does; MemoryLimit is the cap, 0 if none.
	MemoryBytes uint64 `json:"memory_bytes"`
	MemoryLimit uint64 `json:"memory_limit,omitempty"`
}

// ErrContainerNotFound is returned (wrapped) by Driver.Inspect for a container the engine does not know.
var ErrContainerNotFound = errors.New("container not found")

// ExitedError is returned (wrapped) by Driver.Start when the container exited before Start returned. The launch
// learns of this death before the engine's die event is handled, so it records the death itself (launch.go).
type ExitedError struct {
	ExitCode  int
	OOMKilled bool
	At        time.Time
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("container exited right after start (exit %d)", e.ExitCode)
}

// ContainerSpec is everything the driver needs to create a sandbox's container.
type ContainerSpec struct {
	Name    string
	Image   string
	Env     map[string]string
	Labels  map[string]string
	Volume  string // mounted at /workspace
	Profile Profile
	// Network is the Docker network mode or name, already resolved from the profile ("bridge", "<ns>-internal", ...).
	Network   string
	AgentPort int
	// HostBinds are host paths the configuration allows ("host:container[:ro]").
	HostBinds []string
	// AgentSocketDir, set for network none, is the gateway-owned host directory mounted at SocketMountPoint in
	// which the agent creates its socket; Start then answers the socket's address.
	AgentSocketDir string
	// ResolvConf, set for gVisor sandboxes with direct egress, is a gateway-owned host file to mount read-only at
	// /etc/resolv.conf in place of the engine's (resolvconf.go).
	ResolvConf string
	// IdentityDir, set when the profile names its user (Profile.User), is a gateway-owned host directory in which
	// the driver keeps the /etc/passwd and /etc/group it mounts read-only into such sandboxes: the image's, with the
	// profile's user in place of any entry of the same name or id.
	IdentityDir string
	// AgentImage, set when the profile injects the agent (profile_image.go), is the image the agent binary is
	// copied from into a read-only volume named AgentVolumePrefix + that image's id, mounted at AgentMountPoint;
	// the container's command becomes the agent supervising the image's own entrypoint and cmd.
	AgentImage        string
	AgentVolumePrefix string
	// AgentVolumeLabels go on that volume: the namespace's managed label, without an instance or workspace, so
	// no orphan sweep takes it and removing the namespace does.
	AgentVolumeLabels map[string]string
	// HolderLabels, set when the profile keeps network spares (Profile.NetworkSpares), go on the network holders a
	// driver makes ahead for such sandboxes to join: the namespace's managed and instance labels and labelHolder,
	// so the orphan sweep removes a holder nothing joined. A driver without holders ignores them.
	HolderLabels map[string]string
	// HomeSeedLabels go on the volume a driver seeds an injected image's HOME from (one per container, made just
	// before it and removed with it): the namespace's managed and instance labels, labelHomeSeed and the sandbox's
	// labelID, so the orphan sweep removes one a gateway that died between the two left behind (gc.go).
	HomeSeedLabels map[string]string
}

// ContainerState is what the engine reports about one container.
type ContainerState struct {
	ID         string
	Name       string
	Labels     map[string]string
	Created    time.Time
	Running    bool
	Paused     bool // frozen by the cgroup freezer (List reports a paused container as not Running)
	ExitCode   int
	OOMKilled  bool
	Error      string
	FinishedAt time.Time
	// JoinedTo is the container whose network namespace this one joined (its network holder), or "".
	JoinedTo string
}

// VolumeInfo is what the engine reports about one volume.
type VolumeInfo struct {
	Name    string
	Labels  map[string]string
	Created time.Time
}

// ContainerEvent is one engine event about one of our containers.
type ContainerEvent struct {
	ContainerID string
	Action      string // die, oom, destroy
	Labels      map[string]string
	ExitCode    int // for die, from the event's attributes; -1 if absent
	At          time.Time
}
