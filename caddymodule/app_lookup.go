package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/sandboxes"
)

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
	var best *managerHolder
	managers.Range(func(_, v any) bool {
		if h, ok := v.(*managerHolder); ok && h.lastStart.Load() > 0 && (best == nil || h.lastStart.Load() > best.lastStart.Load()) {
			best = h
		}
		return true
	})
	if best == nil {
		return nil
	}
	return best.mgr
}

// BayEnv is what the BAY_* environment said when this app was provisioned: read once per config, in Provision,
// and handed to every module of that config (sandbox_api's keys and data dir, the console's key ring).
func (a *App) BayEnv() bayapi.BayEnv { return a.bayEnv }
