package sandboxes

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ManagerConfig is the Manager's identity: it never changes while the Manager lives (a reload that changes it gets
// a different Manager).
type ManagerConfig struct {
	// Namespace prefixes labels ("<ns>.id"), container, volume and network names. Default "sandgate".
	Namespace string
	// AgentPort is the agent's port inside every sandbox. Default 7777.
	AgentPort int
	// Instance names this gateway on its containers' labels; empty reads it from the store or makes one.
	Instance string
	// SocketDir holds, per sandbox with network none, the host directory bind-mounted at /run/sandgate in which
	// the agent creates its UNIX socket: the gateway's only way in. Default /run/sandgate/<namespace>.
	SocketDir string
	// HostResolvConf is the host's resolv.conf, read for the resolvers of gVisor sandboxes with direct egress
	// (resolvconf.go). Default /etc/resolv.conf.
	HostResolvConf string
	// Clock is the Manager's notion of now for what runs on a sandbox's lifetime: its TTL (created, expired,
	// extended, as a request and the collector see it), its idle and pause deadlines, and the warm pool's demand
	// window; nil is time.Now. Tests move it forward instead of waiting out a TTL, an idle timeout or a window.
	Clock func() time.Time
	// HTTPClient probes the agents' /health; nil uses a client with a short timeout on the Manager's shared
	// keep-alive transport (AgentHTTPClient), so the probe's connection serves the first request after a claim.
	HTTPClient *http.Client
}

// Config is everything a (re)loaded configuration may change while sandboxes keep running.
type Config struct {
	Profiles     []Profile
	MaxSandboxes int // all sandboxes, warm ones included; 0: no cap
	MaxPerOwner  int // 0: no cap
	// DefaultTTL is the lifetime of a sandbox created without one; 0: never expires.
	DefaultTTL time.Duration
	// GCInterval is how often idle, expired and orphaned sandboxes are collected. Default 1m.
	GCInterval time.Duration
	// ExpiryRetention is how long a sandbox whose TTL paused or stopped it (CreateRequest.OnExpire) is kept
	// before it is deleted, unless it resumes first. Default DefaultExpiryRetention.
	ExpiryRetention time.Duration
	// StartTimeout bounds the wait for an agent's readiness (create, restart after idle). Default 60s.
	StartTimeout time.Duration
	// WarmMaxAge recycles warm members older than this. Default 30m.
	WarmMaxAge time.Duration
	// OrphanMinAge spares containers and volumes younger than this from the orphan sweep, which runs this often
	// (at the first collection, then once this much time has passed). Default 5m.
	OrphanMinAge time.Duration
	// MaxConcurrentStarts bounds containers being created and started at once. Default 4.
	MaxConcurrentStarts int
	// WarmRefillPerSecond rate-limits refills per pool. Default 2.
	WarmRefillPerSecond float64
	// WarmDemandWindow is how long a pool remembers creates when it sizes itself (warm.go): a pool grown by a
	// burst shrinks back this long after it. Default 5m.
	WarmDemandWindow time.Duration
	// WarmRetryBackoff is the first pause of a pool's refills after a failed one; it doubles per failure in a row
	// up to 5m. Default 1s.
	WarmRetryBackoff time.Duration
	// WarmRefillHold bounds how long the refill a warm claim triggers waits for the claimed sandbox's first agent
	// call to end, so that call never competes with a container start (warm_hold.go). Default
	// DefaultWarmRefillHold; negative: refill at once.
	WarmRefillHold time.Duration
	// StopGrace is how long a stopped agent gets before SIGKILL. Default 5s.
	StopGrace time.Duration
	// AllowHostBinds permits profiles' binds.
	AllowHostBinds bool
	// Snapshots bounds stored workspace snapshots (snapshots.go).
	Snapshots SnapshotLimits
	// AgentImage is the image the agent is copied from into sandboxes of other images (profile_image.go).
	// Default DefaultAgentImage.
	AgentImage string
}

func (c *Config) setDefaults() {
	if c.AgentImage == "" {
		c.AgentImage = DefaultAgentImage
	}
	if c.GCInterval <= 0 {
		c.GCInterval = time.Minute
	}
	if c.ExpiryRetention <= 0 {
		c.ExpiryRetention = DefaultExpiryRetention
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.WarmMaxAge <= 0 {
		c.WarmMaxAge = 30 * time.Minute
	}
	if c.OrphanMinAge <= 0 {
		c.OrphanMinAge = 5 * time.Minute
	}
	if c.MaxConcurrentStarts <= 0 {
		c.MaxConcurrentStarts = 4
	}
	if c.WarmRefillPerSecond <= 0 {
		c.WarmRefillPerSecond = 2
	}
	if c.WarmDemandWindow <= 0 {
		c.WarmDemandWindow = 5 * time.Minute
	}
	if c.WarmRetryBackoff <= 0 {
		c.WarmRetryBackoff = time.Second
	}
	if c.WarmRefillHold == 0 {
		c.WarmRefillHold = DefaultWarmRefillHold
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 5 * time.Second
	}
}

// Validate checks a configuration without touching any state.
func (c *Config) Validate() error {
	if c.MaxSandboxes < 0 || c.MaxPerOwner < 0 {
		return errors.New("max_sandboxes and max_per_owner must not be negative")
	}
	if c.DefaultTTL < 0 {
		return errors.New("default_ttl must not be negative")
	}
	if c.GCInterval < 0 || c.ExpiryRetention < 0 || c.StartTimeout < 0 || c.WarmMaxAge < 0 || c.OrphanMinAge < 0 ||
		c.MaxConcurrentStarts < 0 || c.WarmRefillPerSecond < 0 || c.WarmDemandWindow < 0 || c.WarmRetryBackoff < 0 {
		return errors.New("sandboxes: durations, max_concurrent_starts and warm_refill_rate must not be negative")
	}
	seen := map[string]bool{}
	for i := range c.Profiles {
		p := &c.Profiles[i]
		if err := p.Validate(); err != nil {
			return err
		}
		if seen[p.ID] {
			return fmt.Errorf("profile %q is defined twice", p.ID)
		}
		seen[p.ID] = true
		if err := validateProfilePlacement(p, c.AllowHostBinds); err != nil {
			return err
		}
	}
	return nil
}

// validateProfilePlacement checks what depends on how the gateway reaches the sandbox and on the host.
func validateProfilePlacement(p *Profile, allowBinds bool) error {
	if p.ConnectMode == ConnectHostPort && (p.Network == "" || p.Network == NetworkInternal || p.Network == NetworkNone) {
		return fmt.Errorf("profile %q: connect_mode host_port publishes a port, which an internal or none network cannot carry; use network bridge or a named network", p.ID)
	}
	if len(p.Binds) > 0 && !allowBinds {
		return fmt.Errorf("profile %q: host binds are refused unless allow_host_binds is set", p.ID)
	}
	for _, b := range p.Binds {
		parts := strings.Split(b, ":")
		if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(parts[0], "/") || !strings.HasPrefix(parts[1], "/") {
			return fmt.Errorf("profile %q: bind %q must be /host/path:/container/path[:ro]", p.ID, b)
		}
		if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
			return fmt.Errorf("profile %q: bind %q: mode must be ro or rw", p.ID, b)
		}
		if err := CheckBindSource(parts[0], EngineSockets); err != nil {
			return fmt.Errorf("profile %q: bind %q refused: %w", p.ID, b, err)
		}
		if parts[1] == "/workspace" {
			return fmt.Errorf("profile %q: bind %q hides the workspace volume", p.ID, b)
		}
	}
	return nil
}
