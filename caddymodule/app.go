package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
	"github.com/sandgate/sandgate/sandboxes/instance"
)

func init() {
	caddy.RegisterModule(new(App))
	caddy.RegisterModule(new(DockerDriver))
}

// managers keeps each sandbox Manager (its instance: store, metrics, loops) alive across config reloads, keyed by
// identity (engine endpoint and label namespace), never by the whole config: a reload that changes a setting
// reaches the same Manager. The last config using it closes it: background loops stop, containers stay.
var managers = newPool[*instance.Instance]()

// App is the `sandboxes` Caddy app: it owns the sandbox Manager, which outlives config reloads.
type App struct {
	// DriverRaw is the container engine driver, a module in the sandboxes.drivers namespace.
	DriverRaw json.RawMessage `json:"driver,omitempty" caddy:"namespace=sandboxes.drivers inline_key=driver"`
	// Namespace prefixes the labels, volume and network names of our containers, so two gateways can share an
	// engine. It is part of the Manager's identity: changing it means a different set of sandboxes.
	Namespace string `json:"namespace,omitempty"`
	// Profiles are the kinds of sandbox that can be created.
	Profiles []sandboxes.Profile `json:"profiles,omitempty"`
	// The Manager's settings: sandboxes.Config says what each does and its default (0 takes it). Durations are
	// Caddy's; WarmRefillRate is Config.WarmRefillPerSecond.
	MaxSandboxes        int            `json:"max_sandboxes,omitempty"`
	MaxPerOwner         int            `json:"max_per_owner,omitempty"`
	GCInterval          caddy.Duration `json:"gc_interval,omitempty"`
	ExpiryRetention     caddy.Duration `json:"expiry_retention,omitempty"` // E2B's autoPause: sandboxes/expiry.go
	DefaultTTL          caddy.Duration `json:"default_ttl,omitempty"`
	StartTimeout        caddy.Duration `json:"start_timeout,omitempty"`
	WarmMaxAge          caddy.Duration `json:"warm_max_age,omitempty"`
	OrphanMinAge        caddy.Duration `json:"orphan_min_age,omitempty"`
	MaxConcurrentStarts int            `json:"max_concurrent_starts,omitempty"`
	WarmRefillRate      float64        `json:"warm_refill_rate,omitempty"`
	WarmDemandWindow    caddy.Duration `json:"warm_demand_window,omitempty"`
	WarmRetryBackoff    caddy.Duration `json:"warm_retry_backoff,omitempty"`
	WarmRefillHold      caddy.Duration `json:"warm_refill_hold,omitempty"` // negative: refill at once, the Caddyfile's "off"
	AllowHostBinds      bool           `json:"allow_host_binds,omitempty"` // the engine's socket is refused regardless
	// OnExit is "keep" (default: sandboxes survive a gateway restart) or "destroy" (remove them when Caddy exits;
	// a reload never does).
	OnExit string `json:"on_exit,omitempty"`
	// Egress is the outbound proxy every profile without its own gets (HTTP(S)_PROXY, NO_PROXY).
	Egress *sandboxes.Egress `json:"egress,omitempty"`
	// Snapshots bounds stored workspace snapshots (caddyfile_sandboxes.go).
	Snapshots *SnapshotOptions `json:"snapshots,omitempty"`
	// Exports bounds the files owners' sandboxes register for import by their other sandboxes (caddyfile_sandboxes.go).
	Exports *ExportOptions `json:"exports,omitempty"`
	// AgentImage is the Manager's Config.AgentImage: where the agent comes from for inject_agent, entrypoint, cmd.
	AgentImage string `json:"agent_image,omitempty"`
	// StoreConfig is the store's backups and the disk warnings (caddyfile_sandboxes.go, sandboxes/limits_config.go).
	StoreConfig *StoreOptions `json:"store,omitempty"`

	driver  Driver
	key     string
	inst    *instance.Instance
	ctx     caddy.Context
	logger  *zap.Logger
	events  *caddyevents.App
	cfg     sandboxes.Config
	unwatch func()
	// bayEnv is the BAY_* environment as Provision read it (sandboxesApp hands it to the config's modules).
	bayEnv bayapi.BayEnv
}

// Driver is what a module in the sandboxes.drivers namespace provides.
type Driver interface {
	// Endpoint names the engine the driver talks to; with the namespace it keys the reload-surviving Manager.
	Endpoint() string
	// NewDriver makes the engine client. It must do no I/O.
	NewDriver() (sandboxes.Driver, error)
}

// StoreDriver is a Driver module that can keep the Manager's sandbox records itself (the kubernetes driver's
// state kubernetes); local is the gateway's own store, which keeps everything else.
type StoreDriver interface {
	NewStore(drv sandboxes.Driver, manager string, local *sandboxes.BoltStore) (sandboxes.Store, error)
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "sandboxes", New: func() caddy.Module { return new(App) }}
}

// Provision loads the driver, checks the configuration and gets the Manager from the pool. It does no I/O: a
// config that fails here never touches the running sandboxes.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	if a.Namespace == "" {
		a.Namespace = "sandgate"
	}
	if a.DriverRaw == nil {
		a.DriverRaw = json.RawMessage(`{"driver":"docker"}`)
	}
	mod, err := ctx.LoadModule(a, "DriverRaw")
	if err != nil {
		return fmt.Errorf("loading sandbox driver: %w", err)
	}
	d, ok := mod.(Driver)
	if !ok {
		return fmt.Errorf("module %T is not a sandbox driver", mod)
	}
	a.driver = d
	if err := a.applyBayEnv(); err != nil {
		return err
	}
	a.cfg = a.managerConfig()
	if err := a.Validate(); err != nil {
		return err
	}
	if ev, err := ctx.App("events"); err == nil {
		a.events, _ = ev.(*caddyevents.App)
	}
	key := d.Endpoint() + "|" + a.Namespace
	a.inst, err = managers.load(key, func() (*instance.Instance, error) {
		drv, err := d.NewDriver()
		if err != nil {
			return nil, err
		}
		cfg := instance.Config{Path: filepath.Join(caddy.AppDataDir(), "sandgate", a.Namespace+".db"), Namespace: a.Namespace,
			Driver: drv, Logger: ctx.Slogger()}
		cfg.Store, _ = a.StoreConfig.settings() // checked by Validate
		if sd, ok := d.(StoreDriver); ok {
			// The driver may keep the sandbox records elsewhere (state kubernetes); the rest stays in the store.
			cfg.Records = func(local *sandboxes.BoltStore) (sandboxes.Store, error) { return sd.NewStore(drv, a.Namespace, local) }
		}
		return instance.Open(cfg)
	})
	if err != nil {
		return fmt.Errorf("sandbox manager: %w", err)
	}
	// Only a config that holds a reference releases one in Cleanup.
	a.key = key
	if err := a.inst.Metrics.Register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering sandbox metrics: %w", err)
	}
	return nil
}

func (a *App) managerConfig() sandboxes.Config {
	snapshots, _ := a.Snapshots.limits() // checked by Validate
	return sandboxes.Config{
		Profiles: sandboxes.WithEgressDefault(a.Profiles, a.Egress), MaxSandboxes: a.MaxSandboxes, MaxPerOwner: a.MaxPerOwner,
		DefaultTTL: time.Duration(a.DefaultTTL), GCInterval: time.Duration(a.GCInterval), ExpiryRetention: time.Duration(a.ExpiryRetention),
		StartTimeout: time.Duration(a.StartTimeout), WarmMaxAge: time.Duration(a.WarmMaxAge),
		OrphanMinAge: time.Duration(a.OrphanMinAge), MaxConcurrentStarts: a.MaxConcurrentStarts,
		WarmRefillPerSecond: a.WarmRefillRate, AllowHostBinds: a.AllowHostBinds, Snapshots: snapshots,
		AgentImage:       a.AgentImage,
		WarmDemandWindow: time.Duration(a.WarmDemandWindow), WarmRetryBackoff: time.Duration(a.WarmRetryBackoff),
		WarmRefillHold: time.Duration(a.WarmRefillHold),
	}
}

// Validate checks the profiles and limits.
func (a *App) Validate() error {
	cfg := a.managerConfig()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, err := a.Snapshots.limits(); err != nil { // caddyfile_limits.go
		return err
	}
	if _, err := a.Exports.limits(); err != nil {
		return err
	}
	if _, err := a.StoreConfig.settings(); err != nil {
		return err
	}
	switch a.OnExit {
	case "", "keep", "destroy":
	default:
		return fmt.Errorf("on_exit must be keep or destroy, not %q", a.OnExit)
	}
	return nil
}

// Manager is the sandbox Manager; modules get the app with sandboxesApp.
func (a *App) Manager() *sandboxes.Manager {
	if a.inst == nil {
		return nil
	}
	return a.inst.Manager
}

// Store is the Manager's store, which the APIs keep their state in too (keys, history, exports).
func (a *App) Store() *sandboxes.BoltStore {
	if a.inst == nil {
		return nil
	}
	return a.inst.Store
}

// Start pings the engine (first start only), applies the new settings (validated in full before anything
// changes) and starts the Manager's loops once.
func (a *App) Start() error {
	// Every app is provisioned by now, the http app with its sites' handlers: check the origin rule before any I/O.
	if h, err := a.ctx.AppIfConfigured("http"); err == nil {
		if err := checkOrigins(h.(*caddyhttp.App)); err != nil {
			return err
		}
	}
	mgr := a.inst.Manager
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Apply(ctx, a.cfg); err != nil {
		return fmt.Errorf("applying sandbox settings: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("starting the sandbox manager: %w", err)
	}
	a.unwatch = a.forwardEvents(mgr)
	a.inst.Started.Store(time.Now().UnixNano())
	a.logger.Info("sandboxes ready", zap.String("namespace", a.Namespace), zap.String("engine", a.driver.Endpoint()),
		zap.Int("profiles", len(a.Profiles)), zap.String("instance", mgr.Instance()))
	return nil
}

// Stop never removes containers: Caddy calls it on every reload. Only when the process exits and on_exit is
// destroy are this Manager's sandboxes removed.
func (a *App) Stop() error {
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
	if a.OnExit == "destroy" && caddy.Exiting() && a.inst != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := a.inst.Manager.DestroyAll(ctx); err != nil {
			a.logger.Error("destroying sandboxes on exit", zap.Error(err))
		}
	}
	return nil
}

// Cleanup releases this config's reference to the pooled Manager; the last release stops its loops.
func (a *App) Cleanup() error {
	if a.inst != nil {
		a.inst.Metrics.Unregister(a.ctx.GetMetricsRegistry())
	}
	return managers.release(a.key)
}

// forwardEvents re-emits lifecycle events on Caddy's events app as sandbox_<type>.
func (a *App) forwardEvents(mgr *sandboxes.Manager) func() {
	if a.events == nil {
		return func() {}
	}
	ch, unsubscribe := mgr.Subscribe(256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			a.events.Emit(a.ctx, "sandbox_"+ev.Type, ev.Fields())
		}
	}()
	return func() {
		unsubscribe()
		<-done
	}
}

// applyBayEnv reads the BAY_* environment and gives the app the profiles a Bay deployment expects
// (bayapi.BayEnv.ProfilesFor).
func (a *App) applyBayEnv() error {
	env, err := bayapi.ReadBayEnv(os.Environ())
	if err != nil {
		return fmt.Errorf("sandboxes: %w", err)
	}
	a.bayEnv = env
	a.Profiles = env.ProfilesFor(a.Profiles)
	return nil
}

// sandboxesApp is how every module provisioned in a config finds the sandbox Manager (app.Manager()) and the
// BAY_* settings (app.BayEnv()): the `sandboxes` app of that same config, loaded if the config did not name it.
// Loading it provisions it, which does no I/O, so modules call this from their Provision.
func sandboxesApp(ctx caddy.Context) (*App, error) {
	mod, err := ctx.App("sandboxes")
	if err != nil {
		return nil, fmt.Errorf("loading the sandboxes app: %w", err)
	}
	app, ok := mod.(*App)
	if !ok {
		return nil, fmt.Errorf("the sandboxes app is a %T, not sandgate's", mod)
	}
	if app.Manager() == nil {
		return nil, fmt.Errorf("the sandboxes app has no Manager")
	}
	return app, nil
}

// runningManager is the admin endpoint's lookup, the one exception to sandboxesApp. The admin endpoint can outlive
// the config its routes were provisioned with (a reload that fails validation keeps the old apps running but not
// necessarily the admin server's context), so it goes through the reload-surviving pool: the Manager most recently
// started, or nil when no sandboxes app is running.
func runningManager() *sandboxes.Manager {
	var best *instance.Instance
	managers.each(func(in *instance.Instance) bool {
		if in.Started.Load() > 0 && (best == nil || in.Started.Load() > best.Started.Load()) {
			best = in
		}
		return true
	})
	if best == nil {
		return nil
	}
	return best.Manager
}

// BayEnv is what the BAY_* environment said when this app was provisioned: read once per config, in Provision,
// and handed to every module of that config (sandbox_api's keys and data dir, the console's key ring).
func (a *App) BayEnv() bayapi.BayEnv { return a.bayEnv }

// DockerDriver is the `sandboxes.drivers.docker` module: sandboxes are containers on one Docker engine.
type DockerDriver struct {
	// Host is the engine endpoint (unix:///var/run/docker.sock, tcp://...); empty means DOCKER_HOST or the default socket.
	Host string `json:"host,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*DockerDriver) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "sandboxes.drivers.docker", New: func() caddy.Module { return new(DockerDriver) }}
}

// Endpoint names the engine.
func (d *DockerDriver) Endpoint() string {
	if d.Host == "" {
		return "docker:default"
	}
	return "docker:" + d.Host
}

// NewDriver makes the Engine API client (API version negotiated: the engine may be as old as 20.10 / API 1.41).
// It does no I/O.
func (d *DockerDriver) NewDriver() (sandboxes.Driver, error) { return docker.New(d.Host) }

// UnmarshalCaddyfile reads
//
//	driver docker {
//	    host <endpoint>
//	}
func (d *DockerDriver) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // the driver name
	if disp.NextArg() {
		return disp.ArgErr()
	}
	return opt.Block{
		"host": opt.String(&d.Host),
		// Sandbox state shared by a fleet lives in the Kubernetes API; a Docker host is one gateway's.
		"state": func(disp *caddyfile.Dispenser) error {
			return disp.Errf("state is an option of the kubernetes driver (a gateway fleet keeps sandbox records in the Kubernetes API); the docker driver keeps them in the gateway's own store")
		},
	}.Parse(disp, "unknown docker driver option %q")
}

var (
	_ caddy.App             = (*App)(nil)
	_ caddy.Provisioner     = (*App)(nil)
	_ caddy.Validator       = (*App)(nil)
	_ caddy.CleanerUpper    = (*App)(nil)
	_ Driver                = (*DockerDriver)(nil)
	_ caddyfile.Unmarshaler = (*DockerDriver)(nil)
)
