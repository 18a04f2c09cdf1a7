// Package routes holds sandgate's request routing logic on net/http alone: the per-sandbox browser routes,
// host rewriting, relays and the API handlers. It never imports Caddy; package caddymodule adapts it.
package routes
