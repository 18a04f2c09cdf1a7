// Package sandboxes is the lifecycle core of sandgate: profiles, the Manager, its store, the warm pool, garbage
// collection and crash detection, over a Driver that talks to a container engine. It imports nothing from Caddy;
// the Caddy glue lives in package caddymodule.
package sandboxes
