package caddymodule

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/sandboxes"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("sandboxes", parseSandboxesOption)
}

// parseSandboxesOption reads the global option `sandboxes { ... }`, one row per option below; `profile <id> { ... }`
// is parseProfile's. A second `sandboxes` block extends the first.
func parseSandboxesOption(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if prev, ok := existing.(httpcaddyfile.App); ok {
		if err := json.Unmarshal(prev.Value, app); err != nil {
			return nil, d.Errf("merging sandboxes options: %v", err)
		}
	}
	d.Next() // the option name
	if err := opt.NoArgs(d); err != nil {
		return nil, err
	}
	err := opt.Block{
		"driver": opt.Module("sandboxes.drivers", optionalDriverBuiltIn, func(name string, unm caddyfile.Unmarshaler) {
			app.DriverRaw = caddyconfig.JSONModuleObject(unm, "driver", name, nil) // driver docker { host unix:///var/run/docker.sock }
		}),
		"namespace":             opt.String(&app.Namespace),
		"max_sandboxes":         opt.Int(&app.MaxSandboxes),
		"max_per_owner":         opt.Int(&app.MaxPerOwner),
		"gc_interval":           opt.Duration(&app.GCInterval),
		"expiry_retention":      opt.Duration(&app.ExpiryRetention), // a sandbox its TTL paused or stopped is deleted this long after
		"default_ttl":           opt.Duration(&app.DefaultTTL),
		"on_exit":               opt.String(&app.OnExit), // keep|destroy
		"start_timeout":         opt.Duration(&app.StartTimeout),
		"warm_max_age":          opt.Duration(&app.WarmMaxAge),
		"orphan_min_age":        opt.Duration(&app.OrphanMinAge),
		"max_concurrent_starts": opt.Int(&app.MaxConcurrentStarts),
		"warm_refill_rate":      opt.Float("warm_refill_rate", &app.WarmRefillRate),
		"warm_demand_window":    opt.Duration(&app.WarmDemandWindow),                        // a pool with warm_pool_max shrinks back this long after a burst
		"warm_retry_backoff":    opt.Duration(&app.WarmRetryBackoff),                        // first pause after a failed refill; doubles up to 5m
		"warm_refill_hold":      opt.DurationOrOff("warm_refill_hold", &app.WarmRefillHold), // a claim's refill waits at most this long for the first call
		"allow_host_binds":      opt.Flag(&app.AllowHostBinds),
		"snapshots":             parseSnapshotsOption(app),   // snapshots { max_size 10g; quota 20g; max_per_owner 50 }
		"exports":               parseExportsOption(app),     // exports { max_per_owner 10000; quota 8m; ttl 7d }
		"store":                 parseStoreOption(app),       // store { backup_interval 1h; backup_keep 3; disk_warn 90% }
		"agent_image":           opt.String(&app.AgentImage), // where the injected agent comes from
		"profile": func(d *caddyfile.Dispenser) error {
			p, err := parseProfile(d)
			app.Profiles = append(app.Profiles, p)
			return err
		},
		"egress_proxy": appEgress(app), // defaults for every profile (profileCustomise)
		"no_proxy":     appEgress(app),
	}.Parse(d, "unknown sandboxes option %q")
	if err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "sandboxes", Value: caddyconfig.JSON(app, nil)}, nil
}

// appEgress reads a profile's egress option as the default of every profile.
func appEgress(app *App) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		if app.Egress == nil {
			app.Egress = &sandboxes.Egress{}
		}
		p := sandboxes.Profile{Egress: app.Egress}
		return profileCustomise(&p)[d.Val()](d)
	}
}

// parseProfile reads `profile <id> { ... }`, one row per option (sandboxes.Profile says what each means); the
// customisation options are profileCustomise's.
func parseProfile(d *caddyfile.Dispenser) (sandboxes.Profile, error) {
	var p sandboxes.Profile
	if !d.Args(&p.ID) {
		return p, d.ArgErr()
	}
	var pids int
	b := opt.Block{
		"image":          opt.String(&p.Image),
		"description":    opt.String(&p.Description),
		"cpus":           opt.Float("cpus", &p.Resources.CPUs),
		"memory":         opt.String(&p.Resources.Memory), // 1g
		"pids":           opt.Int(&pids),
		"disk":           opt.String(&p.Resources.Disk),
		"workspace_size": opt.String(&p.Resources.WorkspaceSize),
		"capabilities":   opt.List(&p.Capabilities), // shell python filesystem
		"env":            envOption(&p.Env),
		"idle_timeout":   duration(&p.IdleTimeout),
		"idle_action":    opt.String(&p.IdleAction), // stop|pause
		"pause_timeout":  duration(&p.PauseTimeout), // idle_action pause: stop after this long paused
		"crash_limit":    opt.Int(&p.CrashLimit),    // deaths rebuilt within crash_window; -1: fail at the first
		"crash_window":   duration(&p.CrashWindow),
		"warm_pool":      opt.Int(&p.WarmPoolSize),
		"warm_pool_size": opt.Int(&p.WarmPoolSize),
		"warm_pool_max":  opt.Int(&p.WarmPoolMax),    // the pool grows with demand up to this; default warm_pool
		"warm_images":    opt.Int(&p.WarmImages),     // warm pools for the images creates ask for; needs allowed_images
		"network_spares": opt.Int(&p.NetworkSpares),  // network namespaces made ahead for cold creates
		"network":        opt.String(&p.Network),     // internal|bridge|none|<docker network>
		"connect_mode":   opt.String(&p.ConnectMode), // container_network|host_port
		"runtime":        opt.String(&p.Runtime),
		"app_port":       opt.Int(&p.AppPort),
		"bind":           opt.Arg(func(v string) error { p.Binds = append(p.Binds, v); return nil }), // /host:/container[:ro]; needs allow_host_binds
		"skills":         opt.OptString(&p.Skills, sandboxes.DefaultSkillsDir),                       // skills [dir] (sandboxes/profile_skills.go)
		"inject_agent":   opt.Flag(&p.InjectAgent),                                                   // the image's own entrypoint under our agent
		"writable_root":  opt.Flag(&p.WritableRoot),
		"entrypoint":     args(&p.Entrypoint), // <program> [args...]: replaces the image's; implies inject_agent
		"cmd":            args(&p.Cmd),        // [args...]: replaces the image's CMD; implies inject_agent
		"allowed_images": opt.List(&p.AllowedImages),
		// Ship's options (sandboxes/profile_ship.go): the sandbox user (its group: the same), HOME, the file the
		// agent writes the env to, names that resolve to the sandbox itself.
		"user":         userOption(&p.User), // user shipyard 1000
		"home":         opt.String(&p.Home),
		"env_file":     opt.String(&p.EnvFile),
		"host_aliases": opt.List(&p.HostAliases),
	}
	maps.Copy(b, profileCustomise(&p))
	err := b.Parse(d, "unknown profile option %q")
	if pids != 0 {
		p.Resources.Pids = int64(pids)
	}
	return p, err
}

// duration reads a sandboxes.Duration (plain digits are seconds).
func duration(dst *sandboxes.Duration) opt.Option {
	return opt.Arg(func(v string) (err error) { *dst, err = sandboxes.ParseDuration(v); return err })
}

// args replaces dst with the option's arguments, at least one.
func args(dst *[]string) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		*dst = nil
		return opt.List(dst)(d)
	}
}

// envOption reads `env <NAME> <value>`, repeatable.
func envOption(env *map[string]string) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		var k, v string
		if !d.Args(&k, &v) {
			return d.ArgErr()
		}
		if *env == nil {
			*env = map[string]string{}
		}
		(*env)[k] = v
		return nil
	}
}

// userOption reads `user <name> <uid>`.
func userOption(dst **sandboxes.SandboxUser) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		var name, uid string
		if !d.Args(&name, &uid) || d.NextArg() {
			return d.ArgErr()
		}
		var err error
		if *dst, err = sandboxes.ParseSandboxUser(name, uid); err != nil {
			return d.Err(err.Error())
		}
		return nil
	}
}

// optionalDriverBuiltIn refuses, with the build that has it, a driver that lives in a Go module of its own
// (kubernetes: github.com/sandgate/sandgate/kubernetes, docs/kubernetes.md) when this gateway was built without it;
// Caddy alone would only say the module is not registered.
func optionalDriverBuiltIn(d *caddyfile.Dispenser, name string) error {
	if name != "kubernetes" {
		return nil
	}
	if _, err := caddy.GetModule("sandboxes.drivers." + name); err != nil {
		return d.Errf("driver kubernetes is not built into this gateway: build it with " +
			"--with github.com/sandgate/sandgate/kubernetes (./xcaddy.sh --kubernetes, make caddy KUBERNETES=1; docs/kubernetes.md)")
	}
	return nil
}

// profileCustomise are the customisation options of a profile block (sandboxes/profile_customise.go), beside
// parseProfile's.
func profileCustomise(p *sandboxes.Profile) opt.Block {
	egress := func(dst func(e *sandboxes.Egress) *[]string) opt.Option {
		return func(d *caddyfile.Dispenser) error {
			if p.Egress == nil {
				p.Egress = &sandboxes.Egress{}
			}
			if dst == nil {
				return opt.String(&p.Egress.Proxy)(d)
			}
			return opt.List(dst(p.Egress))(d)
		}
	}
	return opt.Block{
		"init":           opt.Arg(func(v string) error { p.Init = append(p.Init, v); return nil }), // repeatable, run in order before the sandbox is ready
		"service":        serviceOption(p),
		"dependency":     dependencyOption(p),
		"npm_registry":   opt.String(&p.NPMRegistry),
		"pypi_index_url": opt.String(&p.PyPIIndexURL),
		"apt_mirror":     opt.String(&p.AptMirror),
		"cran_mirror":    opt.String(&p.CRANMirror),                                         // where dependency r packages install from
		"egress_proxy":   egress(nil),                                                       // HTTP(S)_PROXY in the sandbox
		"no_proxy":       egress(func(e *sandboxes.Egress) *[]string { return &e.NoProxy }), // <host>...
		"egress_allow":   egress(func(e *sandboxes.Egress) *[]string { return &e.Allow }),   // <host|*.domain|address|cidr>...
	}
}

// serviceOption reads `service <name> { command <command>; port <port>; restart always|on-failure|never; env <name> <value> }`.
func serviceOption(p *sandboxes.Profile) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		svc := sandboxes.Service{}
		if !d.Args(&svc.Name) || d.NextArg() {
			return d.ArgErr()
		}
		env := func(d *caddyfile.Dispenser) error {
			if d.CountRemainingArgs() != 2 {
				return d.ArgErr()
			}
			return envOption(&svc.Env)(d)
		}
		err := opt.Block{"command": opt.String(&svc.Command), "port": opt.Int(&svc.Port), "restart": opt.String(&svc.Restart), "env": env}.
			Parse(d, "unknown service option %q")
		p.Services = append(p.Services, svc)
		return err
	}
}

// dependencyOption reads `dependency python|node|r <package> [<version>]` and `dependency apt <package>`
// (sandboxes.AddDependency).
func dependencyOption(p *sandboxes.Profile) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		if p.Dependencies == nil {
			p.Dependencies = &sandboxes.Dependencies{}
		}
		if err := sandboxes.AddDependency(p.Dependencies, d.RemainingArgs()); err != nil {
			return d.Err(err.Error())
		}
		return nil
	}
}

// The `sandboxes` app's bounds of snapshots and exports and its store's settings: the config's fields, their
// blocks in the Caddyfile, and their conversion (sandboxes/limits_config.go checks them).

// SnapshotOptions bounds stored workspace snapshots; unset values take sandboxes.SnapshotLimits' defaults.
type SnapshotOptions struct {
	// MaxSize caps one snapshot ("10g").
	MaxSize string `json:"max_size,omitempty"`
	// Quota caps the bytes of all snapshots of one owner ("20g").
	Quota string `json:"quota,omitempty"`
	// MaxPerOwner caps how many snapshots one owner keeps.
	MaxPerOwner int `json:"max_per_owner,omitempty"`
}

func (o *SnapshotOptions) limits() (sandboxes.SnapshotLimits, error) {
	if o == nil {
		return sandboxes.SnapshotLimits{}, nil
	}
	return sandboxes.ParseSnapshotLimits(o.MaxSize, o.Quota, o.MaxPerOwner)
}

// ExportOptions bound the files each owner's sandboxes register as importable by its other sandboxes (the Bay
// API's export/import); unset values take sandboxes.ExportLimits' defaults (10,000 paths, 8 MiB, 7 days).
type ExportOptions struct {
	// MaxPerOwner caps how many registrations one owner keeps across all of its sandboxes.
	MaxPerOwner int `json:"max_per_owner,omitempty"`
	// Quota caps the bytes those registrations take in the gateway's store ("8m").
	Quota string `json:"quota,omitempty"`
	// TTL is how long a registration lives after its last export call.
	TTL caddy.Duration `json:"ttl,omitempty"`
}

func (o *ExportOptions) limits() (sandboxes.ExportLimits, error) {
	if o == nil {
		return sandboxes.ExportLimits{}, nil
	}
	return sandboxes.ParseExportLimits(o.MaxPerOwner, o.Quota, time.Duration(o.TTL))
}

// StoreOptions are the gateway's own store's backups and disk warnings (docs/lifecycle.md, "The gateway's store").
type StoreOptions struct {
	// BackupInterval is how often a backup is written beside the store (default 1h; negative: none, the
	// Caddyfile's "off").
	BackupInterval caddy.Duration `json:"backup_interval,omitempty"`
	// BackupKeep is how many backups are kept, the newest (default 3).
	BackupKeep int `json:"backup_keep,omitempty"`
	// DiskWarnPercent is the used percentage of the data dir's or the engine's disk at which the gateway warns
	// (default 90).
	DiskWarnPercent int `json:"disk_warn_percent,omitempty"`
}

// settings are the options with their defaults filled in.
func (o *StoreOptions) settings() (sandboxes.StoreSettings, error) {
	if o == nil {
		o = &StoreOptions{}
	}
	return sandboxes.NewStoreSettings(time.Duration(o.BackupInterval), o.BackupKeep, o.DiskWarnPercent)
}

// parseSnapshotsOption reads `snapshots { max_size 10g; quota 20g; max_per_owner 50 }`.
func parseSnapshotsOption(app *App) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		o := &SnapshotOptions{}
		size := func(dst *string) opt.Option {
			return opt.Arg(func(v string) error { *dst = v; _, err := sandboxes.ParseBytes(v); return err })
		}
		err := opt.NoArgs(d)
		if err == nil {
			err = opt.Block{"max_size": size(&o.MaxSize), "quota": size(&o.Quota), "max_per_owner": opt.Int(&o.MaxPerOwner)}.
				Parse(d, "unknown snapshots option %q")
		}
		if err == nil && o.MaxPerOwner < 0 {
			err = d.Err("snapshots: max_per_owner must not be negative")
		}
		app.Snapshots = o
		return err
	}
}

// parseExportsOption reads `exports { max_per_owner 10000; quota 8m; ttl 7d }`.
func parseExportsOption(app *App) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		o := &ExportOptions{}
		quota := opt.Arg(func(v string) error { o.Quota = v; _, err := sandboxes.ParseBytes(v); return err })
		err := opt.NoArgs(d)
		if err == nil {
			err = opt.Block{"max_per_owner": opt.Int(&o.MaxPerOwner), "quota": quota, "ttl": opt.Duration(&o.TTL)}.
				Parse(d, "unknown exports option %q")
		}
		if _, lerr := o.limits(); err == nil && lerr != nil {
			err = d.Err(lerr.Error())
		}
		app.Exports = o
		return err
	}
}

// parseStoreOption reads `store { backup_interval 1h|off; backup_keep 3; disk_warn 90% }`.
func parseStoreOption(app *App) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		o := &StoreOptions{}
		keep := opt.Arg(func(v string) (err error) { o.BackupKeep, err = sandboxes.ParseBackupKeep(v); return err })
		warn := opt.Arg(func(v string) (err error) { o.DiskWarnPercent, err = sandboxes.ParseDiskWarn(v); return err })
		err := opt.NoArgs(d)
		if err == nil {
			err = opt.Block{"backup_interval": opt.DurationOrOff("backup_interval", &o.BackupInterval), "backup_keep": keep, "disk_warn": warn}.
				Parse(d, "unknown store option %q")
		}
		app.StoreConfig = o
		return err
	}
}
