// Package bayapi serves sandgate's REST API: a superset of Shipyard Neo's Bay API (same paths, fields, status codes
// and {"error":{code,message,request_id,details}} envelope), so AstrBot's shipyard_neo driver works against the
// gateway unchanged, plus streaming exec, processes, PTY, tickets and Range downloads.
//
// The package is net/http only. It talks to the lifecycle core and to the in-sandbox agent through the small
// consumer-side interfaces in backend.go; the Caddy glue (caddymodule/sandbox_api.go) adapts the real ones.
package bayapi
