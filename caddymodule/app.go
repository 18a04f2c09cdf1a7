package caddymodule

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/sandboxes"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the `sandboxes` Caddy app: it owns the sandbox Manager, which outlives config reloads.
type App struct {
	// DriverRaw is the container engine driver, a module in the sandboxes.drivers namespace.
	DriverRaw json.RawMessage `json:"driver,omitempty" caddy:"namespace=sandboxes.drivers inline_key=driver"`
	// Namespace prefixes the labels, volume and network names of our containers, so two gateways can share an
	// engine. It is part of the Manager's identity: changing it means a different set of sandboxes.
	Namespace string `json:"namespace,omitempty"`
	// Profiles are the kinds of sandbox that can be created.
	Profiles []sandboxes.Profile `json:"profiles,omitempty"`
	// MaxSandboxes caps all sandboxes on this gateway, warm ones included; 0 means no cap.
	MaxSandboxes int `json:"max_sandboxes,omitempty"`
	// MaxPerOwner caps the sandboxes of one API key's owner; 0 means no cap.
	MaxPerOwner int `json:"max_per_owner,omitempty"`
	// GCInterval is how often idle, expired and orphaned sandboxes are collected.
	GCInterval caddy.Duration `json:"gc_interval,omitempty"`
	// DefaultTTL is the lifetime of a sandbox created without a ttl; 0 means it never expires.
	DefaultTTL caddy.Duration `json:"default_ttl,omitempty"`
	// OnExit is "keep" (default: sandboxes survive a gateway restart) or "destroy" (remove them when Caddy exits).
	OnExit string `json:"on_exit,omitempty"`

	driver Driver
}

// Driver is what a module in the sandboxes.drivers namespace provides.
type Driver interface {
	// Endpoint names the engine the driver talks to; with the namespace it keys the reload-surviving Manager.
	Endpoint() string
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "sandboxes", New: func() caddy.Module { return new(App) }}
}

// Provision loads the driver and checks the configuration. It does no I/O: a config that fails here never touches
// the running sandboxes.
func (a *App) Provision(ctx caddy.Context) error {
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
	return nil
}

// Validate checks the profiles and limits.
func (a *App) Validate() error {
	seen := make(map[string]bool, len(a.Profiles))
	for i := range a.Profiles {
		p := &a.Profiles[i]
		if err := p.Validate(); err != nil {
			return err
		}
		if seen[p.ID] {
			return fmt.Errorf("profile %q is defined twice", p.ID)
		}
		seen[p.ID] = true
	}
	if a.MaxSandboxes < 0 || a.MaxPerOwner < 0 {
		return fmt.Errorf("max_sandboxes and max_per_owner must not be negative")
	}
	switch a.OnExit {
	case "", "keep", "destroy":
	default:
		return fmt.Errorf("on_exit must be keep or destroy, not %q", a.OnExit)
	}
	return nil
}

// Start applies the configuration.
func (a *App) Start() error { return nil }

// Stop never removes containers: Caddy calls it on every reload.
func (a *App) Stop() error { return nil }

// Interface guards.
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
	_ caddy.Validator   = (*App)(nil)
)
