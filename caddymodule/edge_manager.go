package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/sandboxes"
)

// sandboxManager returns the reload-surviving Manager of the `sandboxes` app, loading the app if the config did not
// name it. The edge modules use it only at request time; Provision does no I/O.
func sandboxManager(ctx caddy.Context) (*sandboxes.Manager, error) {
	mod, err := ctx.App("sandboxes")
	if err != nil {
		return nil, fmt.Errorf("loading the sandboxes app: %w", err)
	}
	app, ok := mod.(*App)
	if !ok {
		return nil, fmt.Errorf("the sandboxes app is a %T, not sandgate's", mod)
	}
	m := app.Manager()
	if m == nil {
		return nil, fmt.Errorf("the sandboxes app has no Manager")
	}
	return m, nil
}
