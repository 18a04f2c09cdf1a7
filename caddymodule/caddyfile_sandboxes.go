package caddymodule

import (
	"encoding/json"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/sandgate/sandgate/sandboxes"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("sandboxes", parseSandboxesOption)
}

// parseSandboxesOption reads the global option
//
//	sandboxes {
//	    driver docker { host unix:///var/run/docker.sock }
//	    namespace     sandgate
//	    max_sandboxes 50
//	    max_per_owner 10
//	    gc_interval   1m
//	    expiry_retention 24h  (a sandbox its TTL paused or stopped, E2B's autoPause, is deleted this long after)
//	    default_ttl   1h
//	    start_timeout 60s
//	    warm_max_age  30m
//	    orphan_min_age 5m
//	    max_concurrent_starts 4
//	    warm_refill_rate 2
//	    warm_demand_window 5m   (a pool with warm_pool_max shrinks back this long after a burst)
//	    warm_retry_backoff 1s   (first pause after a failed refill; doubles up to 5m)
//	    warm_refill_hold 500ms|off (a claim's refill waits for the claimed sandbox's first call at most this long)
//	    allow_host_binds
//	    on_exit       keep|destroy
//	    snapshots { max_size 10g; quota 20g; max_per_owner 50 }
//	    exports { max_per_owner 10000; quota 8m; ttl 7d }      (files registered for import, per owner)
//	    store { backup_interval 1h; backup_keep 3; disk_warn 90% }   (store backups, disk warnings)
//	    agent_image   sandgate/sandbox:base                 (where the injected agent comes from)
//	    profile <id> {
//	        image         sandgate/sandbox:base
//	        description   <text>
//	        cpus          1
//	        memory        1g
//	        pids          512
//	        disk          256m
//	        workspace_size 1g
//	        capabilities  shell python filesystem
//	        env           <NAME> <value>
//	        idle_timeout  30m
//	        idle_action   stop|pause
//	        pause_timeout 1h                                  (idle_action pause: stop after this long paused)
//	        crash_limit   3      (deaths rebuilt within crash_window; -1: fail at the first)
//	        crash_window  10m
//	        warm_pool     2
//	        warm_pool_max 20     (the pool grows with demand up to this; default: warm_pool)
//	        network       internal|bridge|none|<docker network>
//	        network_spares 2     (network namespaces made ahead for cold creates; internal or bridge, Docker)
//	        connect_mode  container_network|host_port
//	        runtime       runsc
//	        app_port      3000
//	        bind          /host/path:/container/path[:ro]   (needs allow_host_binds)
//	        inject_agent                   (run the image's own entrypoint under our mounted agent)
//	        entrypoint    <program> [args...]   (replaces the image's; implies inject_agent)
//	        cmd           [args...]             (replaces the image's CMD; implies inject_agent)
//	        writable_root                  (relaxes the read-only root filesystem)
//	        allowed_images <image|pattern>...   (images a caller may ask for, e.g. OpenSandbox's image.uri)
//	        warm_images   4      (warm pools for the images creates ask for, at most this many; needs allowed_images)
//	    }
//	}
func parseSandboxesOption(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if prev, ok := existing.(httpcaddyfile.App); ok {
		// A second `sandboxes` block extends the first.
		if err := json.Unmarshal(prev.Value, app); err != nil {
			return nil, d.Errf("merging sandboxes options: %v", err)
		}
	}
	d.Next() // the option name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		var err error
		switch d.Val() {
		case "driver":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			name := d.Val()
			if err := optionalDriverBuiltIn(d, name); err != nil {
				return nil, err
			}
			unm, uerr := caddyfile.UnmarshalModule(d, "sandboxes.drivers."+name)
			if uerr != nil {
				return nil, uerr
			}
			app.DriverRaw = caddyconfig.JSONModuleObject(unm, "driver", name, nil)
		case "namespace":
			err = oneString(d, &app.Namespace)
		case "max_sandboxes":
			err = oneInt(d, &app.MaxSandboxes)
		case "max_per_owner":
			err = oneInt(d, &app.MaxPerOwner)
		case "gc_interval":
			err = oneCaddyDuration(d, &app.GCInterval)
		case "expiry_retention":
			err = oneCaddyDuration(d, &app.ExpiryRetention)
		case "default_ttl":
			err = oneCaddyDuration(d, &app.DefaultTTL)
		case "on_exit":
			err = oneString(d, &app.OnExit)
		case "start_timeout":
			err = oneCaddyDuration(d, &app.StartTimeout)
		case "warm_max_age":
			err = oneCaddyDuration(d, &app.WarmMaxAge)
		case "orphan_min_age":
			err = oneCaddyDuration(d, &app.OrphanMinAge)
		case "max_concurrent_starts":
			err = oneInt(d, &app.MaxConcurrentStarts)
		case "warm_demand_window":
			err = oneCaddyDuration(d, &app.WarmDemandWindow)
		case "warm_retry_backoff":
			err = oneCaddyDuration(d, &app.WarmRetryBackoff)
		case "warm_refill_hold":
			var s string
			if err = oneString(d, &s); err == nil {
				if s == "off" {
					app.WarmRefillHold = -1
				} else if v, perr := caddy.ParseDuration(s); perr != nil || v <= 0 {
					err = d.Errf("warm_refill_hold %q: a positive duration or off", s)
				} else {
					app.WarmRefillHold = caddy.Duration(v)
				}
			}
		case "warm_refill_rate":
			var s string
			if err = oneString(d, &s); err == nil {
				if app.WarmRefillRate, err = strconv.ParseFloat(s, 64); err != nil {
					err = d.Errf("warm_refill_rate %q is not a number", s)
				}
			}
		case "allow_host_binds":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			app.AllowHostBinds = true
		case "snapshots":
			err = parseSnapshotsOption(d, app) // caddyfile_snapshots.go
		case "exports":
			err = parseExportsOption(d, app) // caddyfile_exports.go
		case "store":
			err = parseStoreOption(d, app) // caddyfile_store.go
		case "agent_image":
			err = oneString(d, &app.AgentImage)
		case "profile":
			var p sandboxes.Profile
			if p, err = parseProfile(d); err == nil {
				app.Profiles = append(app.Profiles, p)
			}
		case "egress_proxy", "no_proxy": // defaults for every profile (caddyfile_customise.go)
			if app.Egress == nil {
				app.Egress = &sandboxes.Egress{}
			}
			p := sandboxes.Profile{Egress: app.Egress}
			_, err = parseProfileCustomise(d, &p)
		default:
			return nil, d.Errf("unknown sandboxes option %q", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	return httpcaddyfile.App{Name: "sandboxes", Value: caddyconfig.JSON(app, nil)}, nil
}

func parseProfile(d *caddyfile.Dispenser) (sandboxes.Profile, error) {
	var p sandboxes.Profile
	if !d.Args(&p.ID) {
		return p, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "image":
			err = oneString(d, &p.Image)
		case "description":
			err = oneString(d, &p.Description)
		case "cpus":
			var s string
			if err = oneString(d, &s); err == nil {
				p.Resources.CPUs, err = strconv.ParseFloat(s, 64)
			}
		case "memory":
			err = oneString(d, &p.Resources.Memory)
		case "pids":
			var n int
			err = oneInt(d, &n)
			p.Resources.Pids = int64(n)
		case "disk":
			err = oneString(d, &p.Resources.Disk)
		case "workspace_size":
			err = oneString(d, &p.Resources.WorkspaceSize)
		case "capabilities":
			p.Capabilities = append(p.Capabilities, d.RemainingArgs()...)
			if len(p.Capabilities) == 0 {
				return p, d.ArgErr()
			}
		case "env":
			var k, v string
			if !d.Args(&k, &v) {
				return p, d.ArgErr()
			}
			if p.Env == nil {
				p.Env = map[string]string{}
			}
			p.Env[k] = v
		case "idle_timeout":
			var s string
			if err = oneString(d, &s); err == nil {
				p.IdleTimeout, err = sandboxes.ParseDuration(s)
			}
		case "idle_action":
			err = oneString(d, &p.IdleAction)
		case "pause_timeout":
			var s string
			if err = oneString(d, &s); err == nil {
				p.PauseTimeout, err = sandboxes.ParseDuration(s)
			}
		case "crash_limit":
			err = oneInt(d, &p.CrashLimit)
		case "crash_window":
			var s string
			if err = oneString(d, &s); err == nil {
				p.CrashWindow, err = sandboxes.ParseDuration(s)
			}
		case "warm_pool", "warm_pool_size":
			err = oneInt(d, &p.WarmPoolSize)
		case "warm_pool_max":
			err = oneInt(d, &p.WarmPoolMax)
		case "warm_images":
			err = oneInt(d, &p.WarmImages)
		case "network_spares":
			err = oneInt(d, &p.NetworkSpares)
		case "network":
			err = oneString(d, &p.Network)
		case "connect_mode":
			err = oneString(d, &p.ConnectMode)
		case "runtime":
			err = oneString(d, &p.Runtime)
		case "app_port":
			err = oneInt(d, &p.AppPort)
		case "bind":
			var b string
			if err = oneString(d, &b); err == nil {
				p.Binds = append(p.Binds, b)
			}
		case "skills": // skills [dir]: the owner's released skills as files (sandboxes/profile_skills.go)
			err = optString(d, &p.Skills, sandboxes.DefaultSkillsDir)
		case "inject_agent":
			err = flag(d, &p.InjectAgent)
		case "writable_root":
			err = flag(d, &p.WritableRoot)
		case "entrypoint":
			if p.Entrypoint = d.RemainingArgs(); len(p.Entrypoint) == 0 {
				return p, d.ArgErr()
			}
		case "cmd":
			if p.Cmd = d.RemainingArgs(); len(p.Cmd) == 0 {
				return p, d.ArgErr()
			}
		case "allowed_images":
			more := d.RemainingArgs()
			if len(more) == 0 {
				return p, d.ArgErr()
			}
			p.AllowedImages = append(p.AllowedImages, more...)
		default:
			var handled bool
			if handled, err = parseProfileCustomise(d, &p); !handled { // caddyfile_customise.go
				if handled, err = parseProfileShip(d, &p); !handled { // caddyfile_ship.go
					return p, d.Errf("unknown profile option %q", d.Val())
				}
			}
		}
		if err != nil {
			return p, d.WrapErr(err)
		}
	}
	return p, nil
}

func oneString(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// optString reads an option with one optional argument; without it dst is def.
func optString(d *caddyfile.Dispenser, dst *string, def string) error {
	*dst = def
	if d.NextArg() {
		*dst = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// flag reads an option that takes no argument.
func flag(d *caddyfile.Dispenser, dst *bool) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	*dst = true
	return nil
}

func oneInt(d *caddyfile.Dispenser, dst *int) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return d.Errf("%q is not an integer", s)
	}
	*dst = n
	return nil
}

func oneCaddyDuration(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	v, err := caddy.ParseDuration(s)
	if err != nil {
		return d.Errf("%q is not a duration: %v", s, err)
	}
	*dst = caddy.Duration(v)
	return nil
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
