package sandboxes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Manager owns the sandboxes of one namespace on one engine. Every method is safe for concurrent use.
type Manager struct {
	mcfg   ManagerConfig
	driver Driver
	store  Store
	log    *slog.Logger
	http   *http.Client

	mu       sync.RWMutex
	flushMu  sync.Mutex // one flushAll at a time: it holds many entries' persistMu, and two would deadlock
	cfg      Config
	applied  bool
	profiles map[string]Profile
	entries  map[string]*entry
	sources  sourceIndex         // agent address -> entries (sources.go)
	warm     map[string][]string // profile hash -> ready warm members, oldest first
	pools    map[string]*poolState
	// imagePools are the warm pools by image, keyed by the derived profile's hash (warm_image.go).
	imagePools map[string]*imagePool
	tuner      *concurrencyTuner
	// launching counts launches in flight; freeing holds removed sandboxes whose container may still exist and
	// whose place under max_sandboxes no create has taken yet (warm.go).
	launching int
	active    int // launches holding or past a start slot, not finished
	freeing   []*entry
	// removing are the detached sandboxes whose destroy has not finished (by id): their container and volumes still
	// exist but belong to that destroy, so the orphan sweep leaves them (gc.go). freeing cannot say it: a create
	// takes an entry's place there before its destroy is done.
	removing  map[string]*entry
	agentHTTP *http.Client
	// holds are the claims whose refill waits for the claimed sandbox's first call (warm_hold.go).
	holds refillHolds
	// clock is ManagerConfig.Clock or time.Now.
	clock    func() time.Time
	limiters map[string]*rate.Limiter
	subs     map[int]chan Event
	nextSub  int
	networks map[string]bool
	netMu    sync.Mutex
	instance string

	started bool
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	starts  *startQueue
	gcKick  chan struct{}
	// expiryKick re-arms the collector's timer for the next TTL that keeps its sandbox (expiry.go).
	expiryKick chan struct{}
	warmKick   chan struct{}
	gcTicker   *time.Ticker
	startOnce  sync.Mutex
	// snapMu serialises snapshot captures and deletes, so a per-owner quota check and the capture it allows are
	// one step (snapshots.go).
	snapMu sync.Mutex
	// workspaces are the workspaces being deleted, guarded by mu (workspaces.go).
	workspaces workspaceLocks
	// spares are empty workspace volumes made ahead for copies, guarded by mu (spare_volume.go).
	spares spareVolumes
	// gcRun makes one collection at a time (gc.go): the loop's and one asked for now (RunGC) never interleave, so
	// two never count or remove the same object twice.
	gcRun sync.Mutex
	// gcRunning is true while a collection holds gcRun (GCState); gcCollections counts the finished ones.
	gcRunning     atomic.Bool
	gcCollections atomic.Uint64
	// lastSweep is when the orphan sweep last ran, guarded by mu (gc.go: it runs once per OrphanMinAge).
	lastSweep time.Time
	// inherited names the containers (IDs) and volumes (names) of the namespace that existed when Start listed
	// them, before this Manager could make any: an earlier process made them (gc.go, orphanAged). Written once in
	// Start before the loops run, read under mu.
	inherited map[string]bool
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
	if cfg.HostResolvConf == "" {
		cfg.HostResolvConf = "/etc/resolv.conf"
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
	agentTransport := newAgentTransport()
	// No agent client follows a redirect: a replaced agent could name any host URL (agentapi/pin.go).
	agentHTTP := &http.Client{Transport: agentTransport, CheckRedirect: agentapi.NoRedirect}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: agentHTTP.Transport}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	hc.CheckRedirect = agentapi.NoRedirect
	m := &Manager{
		mcfg: cfg, driver: driver, store: store, log: logger, http: hc, agentHTTP: agentHTTP,
		profiles: map[string]Profile{}, entries: map[string]*entry{}, removing: map[string]*entry{}, sources: sourceIndex{}, warm: map[string][]string{}, pools: map[string]*poolState{}, imagePools: map[string]*imagePool{},
		limiters: map[string]*rate.Limiter{}, subs: map[int]chan Event{}, networks: map[string]bool{},
		gcKick: make(chan struct{}, 1), expiryKick: make(chan struct{}, 1), warmKick: make(chan struct{}, 1), clock: time.Now,
	}
	agentTransport.Observe = m.observeAgentCall // warm_hold.go
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
		var typed *Error // a setting the runtime cannot serve keeps its capability_not_supported (runtime.go)
		if errors.As(err, &typed) {
			return typed
		}
		return Errorf(CodeInvalid, "%v", err)
	}
	cfg.setDefaults()
	m.mu.RLock()
	started := m.started
	m.mu.RUnlock()
	if started { // before Start, Start checks them
		if err := checkRuntimes(ctx, m.driver, cfg.Profiles); err != nil {
			return err
		}
	}
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
	m.mu.RLock()
	profiles := m.cfg.Profiles
	m.mu.RUnlock()
	if err := checkRuntimes(ctx, m.driver, profiles); err != nil {
		return fmt.Errorf("checking the container engine: %w", err)
	}
	instance := m.mcfg.Instance
	if instance == "" {
		if instance, err = m.store.Meta("instance"); err != nil {
			return fmt.Errorf("reading the sandbox store: %w", err)
		}
		if st := m.shared(); st != nil && instance == "" {
			// A fleet is one instance: every gateway's sweep then covers every gateway's containers.
			if instance, err = st.InitMeta("instance", randomHex(6)); err != nil {
				return fmt.Errorf("writing the sandbox store: %w", err)
			}
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
	m.listInherited(ctx) // gc.go
	if err := m.reconcile(ctx); err != nil {
		m.cancel()
		return err
	}
	m.mu.Lock()
	m.started = true
	m.gcTicker = time.NewTicker(m.cfg.GCInterval)
	m.mu.Unlock()
	if st := m.shared(); st != nil {
		m.wg.Add(1)
		go m.followShared(st) // shared.go
	}
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
	m.removeSpares()
	m.flushAll(true)
	m.mu.Lock()
	for id, ch := range m.subs {
		close(ch)
		delete(m.subs, id)
	}
	m.mu.Unlock()
	return errors.Join(m.store.Close(), m.driver.Close())
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

// Stats counts sandboxes by status (warm members under "warm").
func (m *Manager) Stats() map[string]int {
	now := m.clock()
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail on supported platforms
	return hex.EncodeToString(b)
}
