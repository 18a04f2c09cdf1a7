// Package opensandbox serves OpenSandbox's lifecycle API (specs/sandbox-lifecycle.yml) on sandgate's core, so
// OpenSandbox's SDKs (FastGPT's `opensandbox` provider among them) drive sandgate as their sandbox server: create,
// list by metadata, get, delete, metadata patch, pause, resume, renew-expiration, endpoints, and the reverse proxy
// /sandboxes/{id}/proxy/{port}/... to services in the sandbox (port 44772, execd's, maps onto the agent's /execd/).
//
// It is a thin translator: the lifecycle is the sandboxes.Manager's (consumer-side interface in handler.go), keys
// and owners are the REST API's, and errors come from one table (errors.go). Unlike OpenSandbox, proxy paths are not
// open to anyone who knows an id: see proxy.go.
package opensandbox
