package sandboxes

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
	// Clock is the warm pool's notion of now (when creates arrived, when their demand leaves the window); nil is
	// time.Now. Tests move it forward instead of waiting out a window.
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
	// StartTimeout bounds the wait for an agent's readiness (create, restart after idle). Default 60s.
	StartTimeout time.Duration
	// WarmMaxAge recycles warm members older than this. Default 30m.
	WarmMaxAge time.Duration
	// OrphanMinAge spares containers and volumes younger than this from the orphan sweep. Default 5m.
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

// Event types sent to subscribers.
const (
	EventCreated = "created" // a sandbox was created (cold) or claimed (warm)
	EventReady   = "ready"   // its agent answered /health
	EventStopped = "stopped" // compute stopped (idle or asked); workspace kept
	EventStarted = "started" // compute started again after a stop (followed by ready)
	EventDeleted = "deleted" // removed with its workspace (asked, expired or orphaned)
	EventDied    = "died"    // its container died without being asked to
	EventOOM     = "oom"     // a process in it was OOM-killed; the container lives on
	EventFailed  = "failed"  // it could not be started
	EventGC      = "gc"      // the collector removed something (Reason says what)
)

// Event is one lifecycle change.
type Event struct {
	Type       string        `json:"type"`
	SandboxID  string        `json:"sandbox_id,omitempty"`
	Profile    string        `json:"profile,omitempty"`
	Owner      string        `json:"owner,omitempty"`
	LaunchType string        `json:"launch_type,omitempty"`
	Warm       bool          `json:"warm,omitempty"` // the sandbox is a warm-pool member
	Reason     string        `json:"reason,omitempty"`
	Death      *Death        `json:"death,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"` // ready: time since create/start; created (warm): claim time
	At         time.Time     `json:"at"`
}

// Err is the typed error a stream of this sandbox should end with: container_died for a died event, nil for
// every other event.
func (ev Event) Err() error {
	if ev.Type != EventDied || ev.Death == nil {
		return nil
	}
	return diedError(ev.SandboxID, ev.Death)
}

// Launch types.
const (
	LaunchWarm = "warm"
	LaunchCold = "cold"
)

// HintContainerDied is what a client should do when its sandbox died.
const HintContainerDied = "create a new sandbox; do not re-run the same code"

// entry is one sandbox in memory. Fields are guarded by Manager.mu except where noted.
type entry struct {
	rec     Record
	profile Profile // the profile as it was when the container was shaped

	ready         chan struct{} // closed when the current start attempt ends (ready or failed)
	launching     bool
	adopting      bool // a launch that re-attaches to a container found running at start keeps its idle deadline
	cancelLaunch  context.CancelFunc
	leases        int
	expectStop    bool          // we are stopping or removing it: its die event is no crash
	stopping      chan struct{} // non-nil while a stop committed to stopping it runs; closed when it ends
	stopRequested bool          // a stop cancelled the launch in flight
	recovering    bool          // the launch in flight rebuilds a dead container (recovery.go)
	deleted       bool
	lastOOM       time.Time
	lastPersist   time.Time
	startBegan    time.Time
	// The warm pool's bookkeeping (warm.go): refill marks a launch made for the pool and not claimed yet;
	// freshLaunch one that makes a new container; launchLevel the launches working on the engine when it got its
	// start slot (active, since activeAt); after delays
	// its engine calls until the sandbox it replaces is gone; done is closed once a detached entry is destroyed.
	refill      bool
	freshLaunch bool
	launchLevel int
	active      bool
	activeAt    time.Time
	after       <-chan struct{}
	done        chan struct{}
	freedDone   bool

	opMu      sync.Mutex // serialises engine operations on this sandbox (launch, stop, delete)
	persistMu sync.Mutex // orders store writes of this sandbox
}

// Manager owns the sandboxes of one namespace on one engine. Every method is safe for concurrent use.
type Manager struct {
	mcfg   ManagerConfig
	driver Driver
	store  Store
	log    *slog.Logger
	http   *http.Client

	mu       sync.RWMutex
	cfg      Config
	applied  bool
	profiles map[string]Profile
	entries  map[string]*entry
	warm     map[string][]string // profile hash -> ready warm members, oldest first
	pools    map[string]*poolState
	tuner    *concurrencyTuner
	// launching counts launches in flight; freeing holds removed sandboxes whose container may still exist and
	// whose place under max_sandboxes no create has taken yet (warm.go).
	launching int
	active    int // launches holding or past a start slot, not finished
	freeing   []*entry
	agentHTTP *http.Client
	// clock is ManagerConfig.Clock or time.Now.
	clock    func() time.Time
	limiters map[string]*rate.Limiter
	subs     map[int]chan Event
	nextSub  int
	networks map[string]bool
	netMu    sync.Mutex
	instance string

	started   bool
	closed    bool
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	starts    *startQueue
	gcKick    chan struct{}
	warmKick  chan struct{}
	gcTicker  *time.Ticker
	startOnce sync.Mutex
	// snapMu serialises snapshot captures and deletes, so a per-owner quota check and the capture it allows are
	// one step (snapshots.go).
	snapMu sync.Mutex
	// workspaces are the workspaces being deleted, guarded by mu (workspaces.go).
	workspaces workspaceLocks
}

var namespacePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,39}$`)

// NewManager builds a Manager. It does no I/O: Start does.
func NewManager(cfg ManagerConfig, driver Driver, store Store, logger *slog.Logger) (*Manager, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "sandgate"
	}
	if !namespacePattern.MatchString(cfg.Namespace) {
		return nil, fmt.Errorf("namespace %q: lowercase letters, digits, '.', '_' or '-' (at most 40)", cfg.Namespace)
	}
	if cfg.AgentPort == 0 {
		cfg.AgentPort = 7777
	}
	if cfg.SocketDir == "" {
		cfg.SocketDir = "/run/sandgate/" + cfg.Namespace
	}
	if !filepath.IsAbs(cfg.SocketDir) {
		return nil, fmt.Errorf("socket directory %q must be absolute", cfg.SocketDir)
	}
	if driver == nil || store == nil {
		return nil, errors.New("a sandbox manager needs a driver and a store")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	agentHTTP := &http.Client{Transport: newAgentTransport()}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second, Transport: agentHTTP.Transport}
	}
	m := &Manager{
		mcfg: cfg, driver: driver, store: store, log: logger, http: hc, agentHTTP: agentHTTP,
		profiles: map[string]Profile{}, entries: map[string]*entry{}, warm: map[string][]string{}, pools: map[string]*poolState{},
		limiters: map[string]*rate.Limiter{}, subs: map[int]chan Event{}, networks: map[string]bool{},
		gcKick: make(chan struct{}, 1), warmKick: make(chan struct{}, 1), clock: time.Now,
	}
	m.cfg.setDefaults()
	if cfg.Clock != nil {
		m.clock = cfg.Clock
	}
	m.starts = newStartQueue(m.cfg.MaxConcurrentStarts)
	m.tuner = newConcurrencyTuner(m.cfg.MaxConcurrentStarts)
	return m, nil
}

// Namespace is the Manager's label and name prefix.
func (m *Manager) Namespace() string { return m.mcfg.Namespace }

// Instance is this gateway's instance id as written on its containers' labels (known after Start).
func (m *Manager) Instance() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.instance
}

// Apply validates cfg and makes it current. Nothing changes unless all of it is valid. Existing sandboxes keep
// the shape they were created with; warm members of a changed profile are replaced.
func (m *Manager) Apply(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return Errorf(CodeInvalid, "%v", err)
	}
	cfg.setDefaults()
	profiles := make(map[string]Profile, len(cfg.Profiles))
	for _, p := range cfg.Profiles {
		profiles[p.ID] = p
	}
	m.mu.Lock()
	old := m.cfg
	m.cfg = cfg
	m.profiles = profiles
	m.applied = true
	m.starts.setLimit(cfg.MaxConcurrentStarts)
	m.tuner.setCeiling(cfg.MaxConcurrentStarts)
	for _, l := range m.limiters {
		l.SetLimit(rate.Limit(cfg.WarmRefillPerSecond))
	}
	if m.gcTicker != nil && old.GCInterval != cfg.GCInterval {
		m.gcTicker.Reset(cfg.GCInterval)
	}
	m.mu.Unlock()
	kick(m.warmKick)
	if old.WarmMaxAge != cfg.WarmMaxAge || profilesChanged(old.Profiles, cfg.Profiles) {
		kick(m.gcKick)
	}
	return nil
}

func profilesChanged(a, b []Profile) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Hash() != b[i].Hash() || a[i].WarmPoolSize != b[i].WarmPoolSize || a[i].WarmPoolMax != b[i].WarmPoolMax {
			return true
		}
	}
	return false
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Start checks the engine, loads the store, reconciles it with the engine and starts the background loops. Only
// the first call does anything; Apply must have been called first.
func (m *Manager) Start(ctx context.Context) error {
	m.startOnce.Lock()
	defer m.startOnce.Unlock()
	m.mu.RLock()
	started, closed, applied := m.started, m.closed, m.applied
	m.mu.RUnlock()
	if closed {
		return errors.New("sandbox manager is closed")
	}
	if started {
		return nil
	}
	if !applied {
		return errors.New("sandbox manager: Apply a configuration before Start")
	}
	warnings, err := m.driver.Check(ctx)
	if err != nil {
		return fmt.Errorf("checking the container engine: %w", err)
	}
	for _, w := range warnings {
		m.log.Warn(w)
	}
	instance := m.mcfg.Instance
	if instance == "" {
		if instance, err = m.store.Meta("instance"); err != nil {
			return fmt.Errorf("reading the sandbox store: %w", err)
		}
		if instance == "" {
			instance = randomHex(6)
			if err := m.store.SetMeta("instance", instance); err != nil {
				return fmt.Errorf("writing the sandbox store: %w", err)
			}
		}
	}
	m.mu.Lock()
	m.instance = instance
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.mu.Unlock()
	if err := m.reconcile(ctx); err != nil {
		m.cancel()
		return err
	}
	m.mu.Lock()
	m.started = true
	m.gcTicker = time.NewTicker(m.cfg.GCInterval)
	m.mu.Unlock()
	m.wg.Add(3)
	go m.watchEvents()
	go m.gcLoop()
	go m.warmLoop()
	kick(m.gcKick)
	return nil
}

// Close stops the background loops and closes the store and the engine client. It never removes a container.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	cancel := m.cancel
	if m.gcTicker != nil {
		m.gcTicker.Stop()
	}
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
	m.flushAll()
	m.mu.Lock()
	for id, ch := range m.subs {
		close(ch)
		delete(m.subs, id)
	}
	m.mu.Unlock()
	return errors.Join(m.store.Close(), m.driver.Close())
}

// DestroyAll removes every sandbox of this Manager with its workspace (on_exit destroy).
func (m *Manager) DestroyAll(ctx context.Context) error {
	m.mu.RLock()
	ids := make([]string, 0, len(m.entries))
	for id := range m.entries {
		ids = append(ids, id)
	}
	m.mu.RUnlock()
	var errs []error
	for _, id := range ids {
		if err := m.remove(ctx, id, "shutdown"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Create makes a sandbox and returns at once: a warm claim is ready, a cold create is starting and becomes ready
// by itself in the background.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Sandbox, error) {
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, Errorf(CodeInvalid, "invalid env name %q", k)
		}
	}
	if err := ValidateMetadata(req.Metadata); err != nil {
		return nil, err
	}
	if req.WorkspaceID != "" && !workspacePattern.MatchString(req.WorkspaceID) {
		return nil, Errorf(CodeInvalid, "workspace_id %q is not a workspace id (ws-<hex>)", req.WorkspaceID)
	}
	began := time.Now()
	m.mu.Lock()
	if !m.started || m.closed {
		m.mu.Unlock()
		return nil, Errorf(CodeEngine, "the sandbox manager is not running")
	}
	p, ok := m.profiles[req.Profile]
	if !ok {
		known := m.profileIDsLocked()
		m.mu.Unlock()
		return nil, &Error{Code: CodeUnknownProfile, Message: fmt.Sprintf("unknown profile %q", req.Profile),
			Details: map[string]any{"profiles": known}}
	}
	if req.Image != nil {
		derived, err := p.WithImage(*req.Image) // profile_image.go
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		p = derived
	}
	if req.Egress != nil && !p.EgressEnforced() {
		m.mu.Unlock()
		return nil, Errorf(CodeInvalid, "profile %q does not send its sandboxes' traffic through the egress proxy alone (network internal with egress.proxy): a sandbox egress policy cannot be enforced", p.ID)
	}
	now := time.Now()
	m.noteDemandLocked(p.ID) // warm.go
	ttl := req.TTL
	if ttl == 0 {
		ttl = m.cfg.DefaultTTL
	}
	var expires *time.Time
	if ttl > 0 {
		t := now.Add(ttl)
		expires = &t
	}
	if m.cfg.MaxPerOwner > 0 {
		if n := m.ownerCountLocked(req.Owner, now); n >= m.cfg.MaxPerOwner {
			m.mu.Unlock()
			return nil, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf("owner has %d sandboxes, the limit is %d", n, m.cfg.MaxPerOwner),
				Details: map[string]any{"limit": m.cfg.MaxPerOwner, "scope": "owner"}}
		}
	}
	if len(req.Env) == 0 && req.WorkspaceID == "" && req.Image == nil {
		// Pool first: a ready member, else the one that has been starting longest (warm.go).
		launch := LaunchWarm
		e := m.claimLocked(p, now)
		if e == nil {
			if e = m.claimStartingLocked(p); e != nil {
				launch = LaunchPrestarted
			}
		}
		if e != nil {
			e.rec.Warm = false
			e.rec.Owner = req.Owner
			e.rec.LaunchType = launch
			e.rec.CreatedAt = now
			e.rec.ExpiresAt = expires
			e.rec.Metadata = maps.Clone(req.Metadata)
			e.rec.Egress = cloneEgress(req.Egress)
			setIdleDeadline(e, now)
			m.noteCreateLocked(p.ID, launch)
			sb := m.snapshotLocked(e, now)
			m.mu.Unlock()
			m.persist(e)
			kick(m.warmKick)
			m.emit(Event{Type: EventCreated, SandboxID: sb.ID, Profile: sb.Profile, Owner: sb.Owner, LaunchType: launch, Duration: time.Since(began)})
			return sb, nil
		}
	}
	if req.WorkspaceID != "" {
		if err := m.workspaceMountableLocked(req); err != nil { // workspaces.go
			m.mu.Unlock()
			return nil, err
		}
		for _, o := range m.entries {
			if o.rec.WorkspaceID == req.WorkspaceID && !o.deleted {
				m.mu.Unlock()
				return nil, Errorf(CodeInvalid, "workspace %s is in use by sandbox %s", req.WorkspaceID, o.rec.ID)
			}
		}
	}
	var after <-chan struct{}
	if m.cfg.MaxSandboxes > 0 && m.heldLocked() >= m.cfg.MaxSandboxes {
		// Warm members count toward the cap, but a real request beats a prefetched one. The new container is made
		// only once the one it replaces is gone, so the engine never holds more than the cap.
		if victim := m.warmVictimLocked(); victim != nil {
			m.detachLocked(victim)
			go m.destroyDetached(victim, "evicted for a create")
		}
		if len(m.freeing) == 0 {
			m.mu.Unlock()
			return nil, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf("the gateway runs %d sandboxes, the limit is %d", m.cfg.MaxSandboxes, m.cfg.MaxSandboxes),
				Details: map[string]any{"limit": m.cfg.MaxSandboxes, "scope": "global"}}
		}
		after = m.freeing[len(m.freeing)-1].done
		m.freeing = m.freeing[:len(m.freeing)-1]
	}
	m.noteCreateLocked(p.ID, LaunchCold)
	e := m.newEntryLockedAfter(p, req.Owner, req.Env, req.WorkspaceID, expires, false, now, after)
	e.rec.LaunchType = LaunchCold
	e.rec.Metadata = maps.Clone(req.Metadata)
	e.rec.Egress = cloneEgress(req.Egress)
	sb := m.snapshotLocked(e, now)
	e.rec.ManagedWorkspace = e.rec.ManagedWorkspace || req.ownWorkspace // a fork's or snapshot's copy: its own
	m.mu.Unlock()
	m.persist(e)
	kick(m.warmKick)
	m.emit(Event{Type: EventCreated, SandboxID: sb.ID, Profile: sb.Profile, Owner: sb.Owner, LaunchType: LaunchCold})
	return sb, nil
}

var workspacePattern = regexp.MustCompile(`^ws-[0-9a-f]{12}$`)

// newEntryLocked records a new sandbox (before any engine call) and starts its launch in the background.
func (m *Manager) newEntryLocked(p Profile, owner string, env map[string]string, workspace string, expires *time.Time, warm bool, now time.Time) *entry {
	return m.newEntryLockedAfter(p, owner, env, workspace, expires, warm, now, nil)
}

// newEntryLockedAfter is newEntryLocked whose launch makes no engine call before after is closed (the sandbox
// whose place it takes under max_sandboxes is gone).
func (m *Manager) newEntryLockedAfter(p Profile, owner string, env map[string]string, workspace string, expires *time.Time, warm bool, now time.Time, after <-chan struct{}) *entry {
	id := "sandbox-" + randomHex(6)
	for m.entries[id] != nil {
		id = "sandbox-" + randomHex(6)
	}
	managed := workspace == ""
	if managed {
		workspace = "ws-" + randomHex(6)
	}
	spec := p
	e := &entry{profile: p, rec: Record{
		ID: id, Profile: p.ID, ProfileHash: p.Hash(), Owner: owner, WorkspaceID: workspace, ManagedWorkspace: managed,
		Token: randomHex(24), Env: env, CreatedAt: now, ExpiresAt: expires, Phase: PhaseCreating, Generation: 1, Warm: warm,
		Spec: &spec,
	}}
	if warm {
		e.rec.LaunchType = LaunchWarm
	}
	e.after = after
	e.refill = warm
	m.entries[id] = e
	m.beginLaunchLocked(e)
	return e
}

// Get returns one sandbox. Warm-pool members are invisible.
func (m *Manager) Get(ctx context.Context, id string) (*Sandbox, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		return nil, notFound(id)
	}
	return m.snapshotLocked(e, time.Now()), nil
}

// List returns sandboxes newest first, a page at a time; nextCursor is "" on the last page.
func (m *Manager) List(ctx context.Context, opts ListOptions) ([]*Sandbox, string, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = 50
	}
	if limit > 1000 {
		limit = 1000
	}
	var after *cursor
	if opts.Cursor != "" {
		c, err := decodeCursor(opts.Cursor)
		if err != nil {
			return nil, "", Errorf(CodeInvalid, "invalid cursor")
		}
		after = &c
	}
	now := time.Now()
	m.mu.RLock()
	all := make([]*Sandbox, 0, len(m.entries))
	for _, e := range m.entries {
		if e.rec.Warm || e.deleted || (opts.Owner != "" && e.rec.Owner != opts.Owner) || !matchesMetadata(e.rec.Metadata, opts.Metadata) {
			continue
		}
		sb := m.snapshotLocked(e, now)
		if (opts.Status != "" || len(opts.Statuses) > 0) && sb.Status != opts.Status && !slices.Contains(opts.Statuses, sb.Status) {
			continue
		}
		all = append(all, sb)
	}
	m.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return newerThan(all[i].CreatedAt, all[i].ID, all[j].CreatedAt, all[j].ID) })
	start := 0
	if after != nil {
		start = sort.Search(len(all), func(i int) bool { return newerThan(after.at, after.id, all[i].CreatedAt, all[i].ID) })
	}
	end := min(start+limit, len(all))
	page := all[start:end]
	next := ""
	if end < len(all) && len(page) > 0 {
		last := page[len(page)-1]
		next = encodeCursor(cursor{at: last.CreatedAt, id: last.ID})
	}
	return page, next, nil
}

func newerThan(at1 time.Time, id1 string, at2 time.Time, id2 string) bool {
	if !at1.Equal(at2) {
		return at1.After(at2)
	}
	return id1 > id2
}

type cursor struct {
	at time.Time
	id string
}

func encodeCursor(c cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.at.UTC().Format(time.RFC3339Nano) + "|" + c.id))
}

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, err
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return cursor{}, errors.New("malformed cursor")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return cursor{}, err
	}
	return cursor{at: t, id: id}, nil
}

// EnsureRunning returns the sandbox's agent target, starting an idle-stopped sandbox and waiting (bounded by
// the start timeout and ctx) for its readiness. It counts as activity.
func (m *Manager) EnsureRunning(ctx context.Context, id string) (Target, error) {
	triggered := false
	for {
		now := time.Now()
		m.mu.Lock()
		e := m.entries[id]
		if e == nil || e.rec.Warm || e.deleted {
			m.mu.Unlock()
			return Target{}, notFound(id)
		}
		if expired(e, now) {
			m.mu.Unlock()
			return Target{}, expiredError(id)
		}
		if m.closed || !m.started {
			m.mu.Unlock()
			return Target{}, Errorf(CodeEngine, "the sandbox manager is not running")
		}
		if err, ok := m.recoverLocked(e); ok { // a dead container: recovery.go
			m.mu.Unlock()
			return Target{}, err
		}
		switch e.rec.Phase {
		case PhaseRunning:
			if stopping := e.stopping; stopping != nil {
				// The idle collector committed to stopping it before this request's lease: wait for the stop to
				// end, then start it again on the next round.
				m.mu.Unlock()
				select {
				case <-stopping:
				case <-ctx.Done():
					return Target{}, &Error{Code: CodeTimeout, Message: fmt.Sprintf("sandbox %s was still stopping when the request ended", id), Err: ctx.Err()}
				}
				continue
			}
			m.touchLocked(e, now)
			t := m.targetLocked(e)
			m.mu.Unlock()
			return t, nil
		case PhaseStopped, PhaseFailed:
			if triggered {
				msg := e.rec.LastError
				m.mu.Unlock()
				// The launch's typed error survives only as LastError's text ("code: message"): keep the codes a
				// caller acts on (the agent's start-up failure is the sandbox's configuration, not the engine).
				code := CodeEngine
				for _, c := range []string{CodeTimeout, CodeStartupFailed} {
					if strings.HasPrefix(msg, c+":") {
						code = c
					}
				}
				return Target{}, &Error{Code: code, Message: fmt.Sprintf("sandbox %s could not be started: %s", id, msg),
					Details: map[string]any{"last_error": msg}}
			}
			if !e.launching {
				if e.rec.Phase == PhaseStopped {
					m.emitLocked(Event{Type: EventStarted, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner})
				}
				e.rec.Phase = PhaseStarting
				e.rec.LastError = ""
				m.beginLaunchLocked(e)
			}
			triggered = true
		case PhasePaused:
			// Thawed inside the request (pause.go); the next round returns the target.
			m.mu.Unlock()
			if err := m.resume(ctx, e, "request"); err != nil {
				return Target{}, err
			}
			continue
		case PhaseCreating, PhaseStarting:
			if !e.launching {
				// A launch that ended without an outcome (the previous Manager closed mid-start): start again.
				if triggered {
					m.mu.Unlock()
					return Target{}, &Error{Code: CodeEngine, Message: fmt.Sprintf("sandbox %s could not be started", id)}
				}
				m.beginLaunchLocked(e)
				triggered = true
			}
		}
		ch := e.ready
		timeout := m.cfg.StartTimeout
		m.mu.Unlock()
		if ch == nil {
			continue
		}
		timer := time.NewTimer(timeout)
		select {
		case <-ch:
			timer.Stop()
		case <-timer.C:
			return Target{}, &Error{Code: CodeTimeout, Message: fmt.Sprintf("sandbox %s was not ready within %s", id, timeout),
				Details: map[string]any{"timeout_seconds": timeout.Seconds()}}
		case <-ctx.Done():
			timer.Stop()
			return Target{}, &Error{Code: CodeTimeout, Message: fmt.Sprintf("sandbox %s was not ready before the request ended", id), Err: ctx.Err()}
		}
	}
}

// Resolve returns the agent target of a ready sandbox from memory, without I/O.
func (m *Manager) Resolve(id string) (Target, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted || e.rec.Phase != PhaseRunning || e.rec.Died != nil || expired(e, time.Now()) {
		return Target{}, false
	}
	return m.targetLocked(e), true
}

// Exists reports from memory whether id names a live (not expired, not deleted) sandbox.
func (m *Manager) Exists(id string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e := m.entries[id]
	return e != nil && !e.rec.Warm && !e.deleted && !expired(e, time.Now())
}

// Stop stops a sandbox's compute and keeps its workspace. Stopping a stopped sandbox does nothing.
func (m *Manager) Stop(ctx context.Context, id string) error {
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		m.mu.Unlock()
		return notFound(id)
	}
	if e.rec.Phase == PhaseStopped || (e.rec.Phase == PhaseFailed && e.rec.Died != nil) {
		// A crash-looped sandbox stays failed: stopping it must not make it restartable.
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	return m.stop(ctx, e, "requested")
}

// Keepalive extends the idle deadline of a running sandbox. It never starts compute.
func (m *Manager) Keepalive(ctx context.Context, id string) error {
	now := time.Now()
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		m.mu.Unlock()
		return notFound(id)
	}
	if expired(e, now) {
		m.mu.Unlock()
		return expiredError(id)
	}
	m.touchLocked(e, now)
	m.mu.Unlock()
	m.persist(e)
	return nil
}

// ExtendTTL moves the expiry to max(expires_at, now) + by.
func (m *Manager) ExtendTTL(ctx context.Context, id string, by time.Duration) (*Sandbox, error) {
	if by <= 0 {
		return nil, Errorf(CodeInvalid, "extend_by must be positive")
	}
	now := time.Now()
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		m.mu.Unlock()
		return nil, notFound(id)
	}
	if e.rec.ExpiresAt == nil {
		m.mu.Unlock()
		return nil, Errorf(CodeTTLInfinite, "sandbox %s never expires", id)
	}
	if expired(e, now) {
		m.mu.Unlock()
		return nil, expiredError(id)
	}
	base := *e.rec.ExpiresAt
	if now.After(base) {
		base = now
	}
	t := base.Add(by)
	e.rec.ExpiresAt = &t
	sb := m.snapshotLocked(e, now)
	m.mu.Unlock()
	m.persist(e)
	return sb, nil
}

// Delete removes a sandbox, its container and its managed workspace volume. Deleting a missing sandbox is not an
// error.
func (m *Manager) Delete(ctx context.Context, id string) error {
	return m.remove(ctx, id, "deleted")
}

// Acquire holds a lease on a sandbox: while any lease is held it counts as active and the collector never stops
// or removes it. Call release exactly once (more calls do nothing).
func (m *Manager) Acquire(id string) (func(), error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		return nil, notFound(id)
	}
	if expired(e, now) {
		return nil, expiredError(id)
	}
	e.leases++
	m.touchLocked(e, now)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			e.leases--
			m.touchLocked(e, time.Now())
			m.mu.Unlock()
		})
	}, nil
}

// Hold starts a sandbox if it is idle and holds a lease on it until ctx ends: the request that uses the target
// can never lose its container to the idle collector. The lease is taken first, so a collector that has not yet
// committed to a stop sees it, and one that has is waited for (EnsureRunning).
func (m *Manager) Hold(ctx context.Context, id string) (Target, error) {
	release, err := m.Acquire(id)
	if err != nil {
		return Target{}, err
	}
	t, err := m.EnsureRunning(ctx, id)
	if err != nil {
		release()
		return Target{}, err
	}
	context.AfterFunc(ctx, release)
	return t, nil
}

// Touch records activity on a sandbox (resets its idle timer).
func (m *Manager) Touch(id string) {
	now := time.Now()
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		m.mu.Unlock()
		return
	}
	m.touchLocked(e, now)
	due := now.Sub(e.lastPersist) > 5*time.Second
	if due {
		e.lastPersist = now
	}
	m.mu.Unlock()
	if due {
		// Idle deadlines are persisted at most every few seconds; the collector and Close write the rest.
		go m.persist(e)
	}
}

// Profiles returns the configured profiles sorted by id.
func (m *Manager) Profiles() []Profile {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Profile, 0, len(m.profiles))
	for _, p := range m.profiles {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Profile returns one configured profile.
func (m *Manager) Profile(id string) (Profile, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.profiles[id]
	return p, ok
}

// Subscribe returns a channel of lifecycle events and a function that ends the subscription. A subscriber that
// does not keep up loses events rather than slowing the Manager.
func (m *Manager) Subscribe(buffer int) (<-chan Event, func()) {
	if buffer < 1 {
		buffer = 1
	}
	ch := make(chan Event, buffer)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	id := m.nextSub
	m.nextSub++
	m.subs[id] = ch
	m.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			m.mu.Lock()
			if c, ok := m.subs[id]; ok {
				delete(m.subs, id)
				close(c)
			}
			m.mu.Unlock()
		})
	}
}

// Stats counts sandboxes by status (warm members under "warm").
func (m *Manager) Stats() map[string]int {
	now := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]int{}
	for _, e := range m.entries {
		if e.deleted {
			continue
		}
		if e.rec.Warm {
			out["warm"]++
			continue
		}
		out[string(statusOf(e, now))]++
	}
	return out
}

// WarmReady counts warm-pool members ready to be claimed, over all profiles.
func (m *Manager) WarmReady() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, ids := range m.warm {
		for _, id := range ids {
			if e := m.entries[id]; e != nil && e.rec.Warm && e.rec.Phase == PhaseRunning {
				n++
			}
		}
	}
	return n
}

func (m *Manager) emit(ev Event) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	m.emitLocked(ev)
}

// emitLocked sends to subscribers; the caller holds m.mu (read or write).
func (m *Manager) emitLocked(ev Event) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	for _, ch := range m.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// --- helpers over entries (callers hold m.mu) ---

func statusOf(e *entry, now time.Time) Status {
	switch {
	case expired(e, now):
		return StatusExpired
	case e.rec.Phase == PhaseFailed:
		return StatusFailed
	case e.rec.Phase == PhaseRunning:
		return StatusReady
	case e.rec.Phase == PhasePaused:
		return StatusPaused
	case e.rec.Phase == PhaseCreating || e.rec.Phase == PhaseStarting:
		return StatusStarting
	default:
		return StatusIdle
	}
}

func expired(e *entry, now time.Time) bool {
	return e.rec.ExpiresAt != nil && !now.Before(*e.rec.ExpiresAt)
}

func (m *Manager) snapshotLocked(e *entry, now time.Time) *Sandbox {
	sb := &Sandbox{
		ID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Status: statusOf(e, now),
		Capabilities: slices.Clone(e.profile.Capabilities), WorkspaceID: e.rec.WorkspaceID, CreatedAt: e.rec.CreatedAt,
		LaunchType: e.rec.LaunchType, LastError: e.rec.LastError, Metadata: maps.Clone(e.rec.Metadata),
		Egress: cloneEgress(e.rec.Egress),
	}
	if sb.Capabilities == nil {
		sb.Capabilities = []string{}
	}
	if e.rec.ExpiresAt != nil {
		t := *e.rec.ExpiresAt
		sb.ExpiresAt = &t
	}
	if e.rec.IdleExpiresAt != nil && (e.rec.Phase == PhaseRunning || e.rec.Phase == PhasePaused) {
		t := *e.rec.IdleExpiresAt
		sb.IdleExpiresAt = &t
	}
	if e.rec.Died != nil {
		d := *e.rec.Died
		sb.Died = &d
	}
	return sb
}

func (m *Manager) targetLocked(e *entry) Target {
	return Target{SandboxID: e.rec.ID, Addr: e.rec.Addr, Token: e.rec.Token, AppPort: e.profile.AppTarget()}
}

func (m *Manager) touchLocked(e *entry, now time.Time) {
	if e.rec.Phase == PhaseRunning || e.rec.Phase == PhaseStarting {
		setIdleDeadline(e, now)
	}
}

func setIdleDeadline(e *entry, now time.Time) {
	if idle := e.profile.IdleTimeout.Std(); idle > 0 {
		t := now.Add(idle)
		e.rec.IdleExpiresAt = &t
	} else {
		e.rec.IdleExpiresAt = nil
	}
}

func (m *Manager) ownerCountLocked(owner string, now time.Time) int {
	n := 0
	for _, e := range m.entries {
		if !e.rec.Warm && !e.deleted && e.rec.Owner == owner && !expired(e, now) {
			n++
		}
	}
	return n
}

func (m *Manager) profileIDsLocked() []string {
	ids := make([]string, 0, len(m.profiles))
	for id := range m.profiles {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func notFound(id string) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("sandbox %s not found", id)}
}

func expiredError(id string) error {
	return &Error{Code: CodeExpired, Message: fmt.Sprintf("sandbox %s has expired", id),
		Hint: "create a new sandbox; an expired sandbox and its workspace cannot be revived"}
}

func diedError(id string, d *Death) error {
	return &Error{Code: CodeContainerDied, Message: fmt.Sprintf("sandbox %s: its container died (%s)", id, d.Message),
		Hint: HintContainerDied, Details: map[string]any{"reason": d.Reason, "exit_code": d.ExitCode, "at": d.At}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail on supported platforms
	return hex.EncodeToString(b)
}
