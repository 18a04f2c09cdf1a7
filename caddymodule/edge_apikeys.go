package caddymodule

import (
	"context"
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// apiKeyChecker lets sandbox_ticket admit the API's bearer keys on a sandbox's mcp route (service.KeyAllows).
type apiKeyChecker struct {
	keys *service.LiveKeys
	// svc is the lifecycle-only service over the app's Manager: the owner rule is the service's.
	svc *service.Service
}

func (k apiKeyChecker) KeyAllows(ctx context.Context, token, sandboxID string) bool {
	return k.svc.KeyAllows(ctx, k.keys, token, sandboxID)
}

// newAPIKeyChecker takes a reference to the live key ring of dataDir; release it with apiKeyRings.Delete on the
// returned key.
func newAPIKeyChecker(ctx caddy.Context, dataDir string) (apiKeyChecker, string, error) {
	app, err := sandboxesApp(ctx)
	if err != nil {
		return apiKeyChecker{}, "", err
	}
	dir, err := apiDataDir(app.BayEnv(), dataDir)
	if err != nil {
		return apiKeyChecker{}, "", err
	}
	ring, ringKey, err := loadAPIKeyRing(dir)
	if err != nil {
		return apiKeyChecker{}, "", fmt.Errorf("the API's keys: %w", err)
	}
	// Lifecycle only: no agent client, so whatever reaches an agent through it answers capability_not_supported.
	svc := service.New(service.Config{Sandboxes: app.Manager(), Logger: ctx.Slogger()})
	return apiKeyChecker{keys: ring, svc: svc}, ringKey, nil
}
