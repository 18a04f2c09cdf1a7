// Package service holds the operations every API dialect needs, free of Caddy and of HTTP: who is calling
// (identity.go), the typed errors every dialect maps to its own wire format (errors.go), the client of the
// in-sandbox agent (agent*.go) and ticket minting (tickets.go).
//
// Dialects (routes/bayapi, routes/mcpapi, routes/pages, routes/opensandbox) parse their wire format, call into this
// package and translate its answers and errors back; caddymodule only builds the values here from configuration.
// Among sandgate's packages it imports sandboxes, agentimage/agentapi and tickets only.
package service
