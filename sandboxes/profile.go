package sandboxes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Capabilities a profile can grant. They gate the API (Bay's `capability_not_supported`) and tell the agent which
// services to supervise (the browser capability starts Xvfb, Chromium and the VNC server).
const (
	CapShell      = "shell"
	CapPython     = "python"
	CapFilesystem = "filesystem"
	CapBrowser    = "browser"
	CapVNC        = "vnc"
	CapNode       = "node"
	CapR          = "r"
)

var knownCapabilities = []string{CapShell, CapPython, CapFilesystem, CapBrowser, CapVNC, CapNode, CapR}

// Network modes of a profile.
const (
	// NetworkInternal puts the sandbox on a Docker network created with `internal: true`: the gateway reaches
	// the agent, the sandbox reaches nothing outside. The default.
	NetworkInternal = "internal"
	// NetworkBridge gives the sandbox outbound access through Docker's default bridge.
	NetworkBridge = "bridge"
	// NetworkNone gives the sandbox no network interface but loopback.
	NetworkNone = "none"
)

// Connect modes: how the gateway reaches the agent.
const (
	ConnectContainerNetwork = "container_network" // the container's address on its network
	ConnectHostPort         = "host_port"         // a port published on 127.0.0.1
)

// MaxNetworkSpares bounds Profile.NetworkSpares: each spare is a running container (a sleeping process and its
// shim, about 4 MB), and a burst past the spares still gets the engine's own network set-up.
const MaxNetworkSpares = 16

// Resources bounds what one sandbox may use. Field names follow Bay's profile schema (cpus, memory).
type Resources struct {
	// CPUs is a fraction of host CPUs (Docker NanoCPUs), e.g. 1.5.
	CPUs float64 `json:"cpus,omitempty"`
	// Memory is a byte size with an optional k/m/g suffix ("512m", "1g"); swap is never granted on top of it.
	Memory string `json:"memory,omitempty"`
	// Pids caps the number of processes (fork bombs).
	Pids int64 `json:"pids,omitempty"`
	// Disk sizes the writable tmpfs mounts (/tmp and $HOME) of the read-only root filesystem.
	Disk string `json:"disk,omitempty"`
	// WorkspaceSize caps the sandbox's workspace volume (/workspace), a byte size like Disk: past it, writes fail
	// with ENOSPC in that sandbox alone. Empty: unlimited (the host's disk), as before it existed.
	WorkspaceSize string `json:"workspace_size,omitempty"`
}

// WorkspaceBytes is the workspace size limit in bytes, 0 when unlimited (or unparsable: Validate refuses that).
func (r Resources) WorkspaceBytes() int64 {
	if r.WorkspaceSize == "" {
		return 0
	}
	n, err := ParseBytes(r.WorkspaceSize)
	if err != nil {
		return 0
	}
	return n
}

// MinWorkspaceSize is the smallest workspace_size: a filesystem smaller than this holds little but its metadata.
const MinWorkspaceSize = 16 << 20

// Profile is a kind of sandbox: an image, its limits, its capabilities and its lifecycle settings. The JSON field
// names are a superset of Bay's profile schema, so BAY_PROFILES documents can be read as they are.
type Profile struct {
	ID           string            `json:"id"`
	Description  string            `json:"description,omitempty"`
	Image        string            `json:"image"`
	Resources    Resources         `json:"resources,omitempty"`
	Capabilities []string          `json:"capabilities,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	// IdleTimeout stops the container (keeping its workspace) after this long without activity; 0 never does.
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// IdleAction is what the idle timeout does: stop (the default) or pause (pause.go).
	IdleAction string `json:"idle_action,omitempty"`
	// PauseTimeout stops a sandbox paused for idleness once it has stayed paused this long (default 1h).
	PauseTimeout Duration `json:"pause_timeout,omitempty"`
	// WarmPoolSize is how many ready sandboxes of this profile are kept waiting for a create.
	WarmPoolSize int `json:"warm_pool_size,omitempty"`
	// WarmPoolMax lets the pool grow past WarmPoolSize (its floor) when demand asks for it (warm.go); 0 keeps
	// the pool at WarmPoolSize.
	WarmPoolMax int `json:"warm_pool_max,omitempty"`
	// WarmImages keeps warm pools by image for a profile with allowed_images: at most this many shapes (image,
	// entrypoint, resources) a create asked for recently (warm_image.go); 0 keeps none.
	WarmImages int `json:"warm_images,omitempty"`
	// Network is none, bridge or internal (the default), or the name of an existing Docker network.
	Network string `json:"network,omitempty"`
	// NetworkSpares is how many network namespaces the Docker driver keeps made ahead on the profile's network: a
	// cold create joins one instead of waiting for the engine to set up the sandbox's network (docs/lifecycle.md,
	// "Network spares"). 0 makes none.
	NetworkSpares int `json:"network_spares,omitempty"`
	// ConnectMode is container_network (the default) or host_port.
	ConnectMode string `json:"connect_mode,omitempty"`
	// Runtime is the OCI runtime (e.g. runsc for gVisor); empty means the engine's default.
	Runtime string `json:"runtime,omitempty"`
	// AppPort is the port inside the sandbox that /app routes to.
	AppPort int `json:"app_port,omitempty"`
	// CrashLimit is how many container deaths inside CrashWindow are rebuilt on the next use; one more and the
	// sandbox stays failed with the reason. 0 means DefaultCrashLimit; negative fails at the first death.
	CrashLimit int `json:"crash_limit,omitempty"`
	// CrashWindow is how far back deaths count toward CrashLimit; 0 means DefaultCrashWindow.
	CrashWindow Duration `json:"crash_window,omitempty"`
	// Binds are host paths mounted into the sandbox ("/host/path:/container/path[:ro]"). They are refused unless
	// the configuration sets allow_host_binds, and the Docker socket is refused always.
	Binds []string `json:"binds,omitempty"`

	// Customisation (profile_customise.go), done by the agent before it reports ready.
	Init         []string               `json:"init,omitempty"`
	Services     []agentapi.ServiceSpec `json:"services,omitempty"`
	Dependencies *agentapi.Dependencies `json:"dependencies,omitempty"`
	NPMRegistry  string                 `json:"npm_registry,omitempty"`
	PyPIIndexURL string                 `json:"pypi_index_url,omitempty"`
	AptMirror    string                 `json:"apt_mirror,omitempty"`
	CRANMirror   string                 `json:"cran_mirror,omitempty"`
	Egress       *Egress                `json:"egress,omitempty"`

	// Any image (profile_image.go): our agent mounted read-only into an image that is not ours, supervising the
	// image's own entrypoint.
	InjectAgent bool `json:"inject_agent,omitempty"`
	// Entrypoint and Cmd replace the image's ENTRYPOINT and CMD (Docker's rules: an entrypoint clears the image's
	// CMD). Either one implies InjectAgent.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// WritableRoot relaxes the read-only root filesystem, for images that write outside /tmp, $HOME and the
	// workspace (to /etc, /var, /run). Everything else of the hardening stays.
	WritableRoot bool `json:"writable_root,omitempty"`
	// AllowedImages lists the images a caller may ask for when creating from this profile (CreateRequest.Image),
	// as exact references or path.Match patterns ("registry.example/team/*:*"). Empty: callers cannot choose.
	AllowedImages []string `json:"allowed_images,omitempty"`

	// Ship's conventions (profile_ship.go), for profiles that stand in for Shipyard Neo's Ship image: the user the
	// sandbox runs as (default: the images' `sandbox`, uid 65532), HOME (default /home/sandbox), a file in the
	// workspace the agent writes the profile's env to as `export` lines (Ship's /workspace/.bay_env.sh), and names
	// that resolve to the sandbox itself (Ship's `ship`, which its Gull browser reaches).
	User        *SandboxUser `json:"user,omitempty"`
	Home        string       `json:"home,omitempty"`
	EnvFile     string       `json:"env_file,omitempty"`
	HostAliases []string     `json:"host_aliases,omitempty"`
	// Skills, when set, is the workspace directory the owner's released skills are written to (profile_skills.go).
	Skills string `json:"skills,omitempty"`
}

var profileIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Validate reports the first thing wrong with the profile, naming the profile and the field.
func (p *Profile) Validate() error {
	if !profileIDPattern.MatchString(p.ID) {
		return fmt.Errorf("profile %q: id must be lowercase letters, digits, '.', '_' or '-' (at most 63)", p.ID)
	}
	if strings.TrimSpace(p.Image) == "" {
		return fmt.Errorf("profile %q: image is required", p.ID)
	}
	if p.Resources.CPUs < 0 {
		return fmt.Errorf("profile %q: cpus must not be negative", p.ID)
	}
	if p.Resources.Memory != "" {
		if _, err := ParseBytes(p.Resources.Memory); err != nil {
			return fmt.Errorf("profile %q: memory: %w", p.ID, err)
		}
	}
	if p.Resources.Disk != "" {
		if _, err := ParseBytes(p.Resources.Disk); err != nil {
			return fmt.Errorf("profile %q: disk: %w", p.ID, err)
		}
	}
	if p.Resources.WorkspaceSize != "" {
		n, err := ParseBytes(p.Resources.WorkspaceSize)
		if err == nil && n < MinWorkspaceSize {
			err = fmt.Errorf("%s is below the minimum of 16m", p.Resources.WorkspaceSize)
		}
		if err != nil {
			return fmt.Errorf("profile %q: workspace_size: %w", p.ID, err)
		}
	}
	if p.Resources.Pids < 0 {
		return fmt.Errorf("profile %q: pids must not be negative", p.ID)
	}
	for _, c := range p.Capabilities {
		if !slices.Contains(knownCapabilities, c) {
			return fmt.Errorf("profile %q: unknown capability %q (known: %s)", p.ID, c, strings.Join(knownCapabilities, ", "))
		}
	}
	if p.CrashWindow < 0 {
		return fmt.Errorf("profile %q: crash_window must not be negative", p.ID)
	}
	if p.WarmPoolSize < 0 {
		return fmt.Errorf("profile %q: warm_pool_size must not be negative", p.ID)
	}
	if p.WarmPoolMax < 0 || (p.WarmPoolMax > 0 && p.WarmPoolMax < p.WarmPoolSize) {
		return fmt.Errorf("profile %q: warm_pool_max must be 0 or at least warm_pool_size", p.ID)
	}
	if p.WarmImages < 0 || p.WarmImages > MaxWarmImages {
		return fmt.Errorf("profile %q: warm_images must be between 0 and %d", p.ID, MaxWarmImages)
	}
	if p.WarmImages > 0 && len(p.AllowedImages) == 0 {
		return fmt.Errorf("profile %q: warm_images keeps pools of the images a create names, and needs allowed_images", p.ID)
	}
	if p.NetworkSpares < 0 || p.NetworkSpares > MaxNetworkSpares {
		return fmt.Errorf("profile %q: network_spares must be between 0 and %d", p.ID, MaxNetworkSpares)
	}
	if p.NetworkSpares > 0 && (p.ConnectMode == ConnectHostPort || !(p.Network == "" || p.Network == NetworkInternal || p.Network == NetworkBridge)) {
		return fmt.Errorf("profile %q: network_spares needs the gateway's own network (internal or bridge) and connect_mode %s", p.ID, ConnectContainerNetwork)
	}
	if err := p.refusedUnderRuntime(); err != nil { // runtime.go
		return err
	}
	switch p.ConnectMode {
	case "", ConnectContainerNetwork, ConnectHostPort:
	default:
		return fmt.Errorf("profile %q: connect_mode must be %s or %s", p.ID, ConnectContainerNetwork, ConnectHostPort)
	}
	if p.AppPort < 0 || p.AppPort > 65535 {
		return fmt.Errorf("profile %q: app_port %d is not a port", p.ID, p.AppPort)
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("profile %q: invalid env name %q", p.ID, k)
		}
	}
	if err := p.validateLifecycle(); err != nil { // pause.go
		return err
	}
	if err := p.validateImage(); err != nil { // profile_image.go
		return err
	}
	if err := p.validateShip(); err != nil { // profile_ship.go
		return err
	}
	if err := p.validateSkills(); err != nil { // profile_skills.go
		return err
	}
	return p.validateCustomise()
}

// HasCapability reports whether the profile grants c.
func (p *Profile) HasCapability(c string) bool { return slices.Contains(p.Capabilities, c) }

// Hash identifies everything about the profile that shapes a container. Warm-pool members created under another
// hash are stale and get replaced.
func (p *Profile) Hash() string {
	shape := *p
	shape.Description = ""
	shape.WarmPoolSize = 0
	shape.WarmPoolMax = 0
	shape.Skills = "" // written by the gateway into the workspace, not part of the container
	shape.WarmImages = 0
	shape.NetworkSpares = 0
	shape.IdleTimeout = 0
	shape.IdleAction = ""
	shape.PauseTimeout = 0
	shape.CrashLimit = 0
	shape.CrashWindow = 0
	shape.AllowedImages = nil
	b, _ := json.Marshal(shape) // a struct of plain fields always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ParseBytes reads a size such as "512m", "1g", "1.5GiB", "512Mi" (Kubernetes' form, which OpenSandbox's
// resourceLimits use) or "1048576" into bytes (binary multiples, as Docker does).
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	if n := len(t); n >= 2 && t[n-1] == 'i' && strings.ContainsRune("kmgt", rune(t[n-2])) {
		t = t[:n-1]
	}
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult, t = 1<<10, t[:n-1]
		case 'm':
			mult, t = 1<<20, t[:n-1]
		case 'g':
			mult, t = 1<<30, t[:n-1]
		case 't':
			mult, t = 1<<40, t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return int64(f * float64(mult)), nil
}
