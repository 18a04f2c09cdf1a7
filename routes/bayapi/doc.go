// Package bayapi serves sandgate's REST API: a superset of Shipyard Neo's Bay API (same paths, fields, status codes
// and {"error":{code,message,request_id,details}} envelope), so AstrBot's shipyard_neo driver works against the
// gateway unchanged, plus streaming exec, processes, PTY, tickets and Range downloads.
//
// The package is net/http only and translates: it parses Bay's requests, calls the operations of sandboxes/service
// (owner checks, exec, files, kernels, transfers, tickets, snapshots), answers in Bay's shapes and maps the
// service's error codes to Bay's statuses in one table (errors.go). The Caddy glue (caddymodule/sandbox_api.go)
// builds the service and the handler.
package bayapi
