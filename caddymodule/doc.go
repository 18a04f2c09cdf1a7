// Package caddymodule is sandgate's Caddy glue and nothing else: module registration, Caddyfile parsing,
// Provision/Validate/Start/Stop/Cleanup, and adapters from packages sandboxes and routes to Caddy's types.
package caddymodule
