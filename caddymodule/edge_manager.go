package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/sandboxes"
)

// managerHolder is what the `sandboxes` app offers the edge modules.
type managerHolder interface {
	Manager() *sandboxes.Manager
}

// sandboxManager returns the reload-surviving Manager of the `sandboxes` app, loading the app if the config did not
// name it. The Manager is only used at request time; Provision does no I/O.
func sandboxManager(ctx caddy.Context) (*sandboxes.Manager, error) {
	app, err := ctx.App("sandboxes")
	if err != nil {
		return nil, fmt.Errorf("loading the sandboxes app: %w", err)
	}
	h, ok := app.(managerHolder)
	if !ok {
		return nil, fmt.Errorf("the sandboxes app (%T) does not expose a Manager", app)
	}
	m := h.Manager()
	if m == nil {
		return nil, fmt.Errorf("the sandboxes app has no Manager")
	}
	return m, nil
}
