package bayapi

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// OpenAPI is this API's OpenAPI 3.1 document, built from the same route table as the mux so the two cannot drift.
func (h *Handler) OpenAPI() map[string]any {
	paths := map[string]any{}
	for _, rt := range h.routes {
		// OpenAPI path templates have no wildcard: {rest...} is documented as {rest}.
		key := strings.ReplaceAll(rt.path, "...}", "}")
		item, _ := paths[key].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[key] = item
		}
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": operationID(rt),
			"tags":        []string{routeTag(rt)},
			"responses":   responsesFor(rt),
		}
		if !rt.bay {
			op["x-sandgate-extension"] = true
		}
		if rt.public {
			op["security"] = []any{}
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		params = append(params, queryParams[rt.method+" "+rt.path]...)
		if rt.method == "POST" && (strings.HasSuffix(rt.path, "/sandboxes") || strings.HasSuffix(rt.path, "/extend_ttl") || strings.HasSuffix(rt.path, "/cargos")) {
			params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false, "schema": map[string]any{"type": "string"}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if body, ok := requestBodies[rt.method+" "+rt.path]; ok {
			op["requestBody"] = body
		}
		item[strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "sandgate sandbox API (Shipyard Neo Bay compatible)",
			"version":     h.cfg.Version,
			"description": "A superset of Shipyard Neo's Bay API v1. Operations marked x-sandgate-extension are additions.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas":         schemas,
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
}

func (h *Handler) openapi(w http.ResponseWriter, _ *http.Request, _ service.Principal) {
	writeJSON(w, http.StatusOK, h.OpenAPI())
}

var pathParam = regexp.MustCompile(`\{([a-z]+)(?:\.\.\.)?\}`)

func operationID(rt route) string {
	s := strings.NewReplacer("/v1/", "", "{", "", "}", "", "/", "_", "...", "").Replace(rt.path)
	return strings.ToLower(rt.method) + "_" + strings.Trim(s, "_")
}

func routeTag(rt route) string {
	switch {
	case strings.Contains(rt.path, "/filesystem/"):
		return "filesystem"
	case strings.Contains(rt.path, "/history"):
		return "history"
	case strings.Contains(rt.path, "/cargos"):
		return "cargos"
	case strings.Contains(rt.path, "/browser/"):
		return "browser"
	case strings.Contains(rt.path, "/exec"), strings.Contains(rt.path, "/processes"), strings.HasSuffix(rt.path, "/pty"):
		return "exec"
	case strings.HasSuffix(rt.path, "/tickets"):
		return "tickets"
	case strings.HasPrefix(rt.path, "/v1/sandboxes"):
		return "sandboxes"
	default:
		return "meta"
	}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func jsonContent(schema any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schema}}
}

func responsesFor(rt route) map[string]any {
	key := rt.method + " " + rt.path
	status, schema := "200", any(map[string]any{"type": "object"})
	if s, ok := successSchemas[key]; ok {
		schema = s
	}
	switch {
	case rt.method == "DELETE" && (strings.HasSuffix(rt.path, "/sandboxes/{id}") || strings.HasSuffix(rt.path, "/cargos/{cid}")):
		status = "204"
	case key == "POST /v1/sandboxes" || key == "POST /v1/cargos" || strings.HasSuffix(rt.path, "/tickets") || strings.HasSuffix(rt.path, "/pty"):
		status = "201"
	}
	out := map[string]any{}
	switch {
	case status == "204":
		out[status] = map[string]any{"description": "Done (also when already gone)"}
	case strings.HasSuffix(rt.path, "/download"):
		out["200"] = map[string]any{"description": "The file", "content": map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
		out["206"] = map[string]any{"description": "A byte range of the file"}
	case strings.HasSuffix(rt.path, "/stream") || strings.HasSuffix(rt.path, "/output"):
		out["200"] = map[string]any{"description": "Server-sent events", "content": map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}}
	default:
		out[status] = map[string]any{"description": "Success", "content": jsonContent(schema)}
	}
	out["422"] = map[string]any{"description": "Request validation failed (FastAPI shape)", "content": jsonContent(ref("HTTPValidationError"))}
	out["default"] = map[string]any{"description": "Error envelope", "content": jsonContent(ref("ErrorResponse"))}
	return out
}

func qp(name, typ string, extra map[string]any) map[string]any {
	s := map[string]any{"type": typ}
	for k, v := range extra {
		s[k] = v
	}
	return map[string]any{"name": name, "in": "query", "required": false, "schema": s}
}

func requiredQP(name string) map[string]any {
	return map[string]any{"name": name, "in": "query", "required": true, "schema": map[string]any{"type": "string"}}
}

const sbPath = "/v1/sandboxes/{id}"

var queryParams = map[string][]any{
	"GET /v1/profiles": {qp("detail", "boolean", nil)},
	"GET /v1/sandboxes": {qp("limit", "integer", map[string]any{"minimum": 1, "maximum": 200, "default": 50}), qp("cursor", "string", nil),
		qp("status", "string", map[string]any{"enum": []string{"idle", "starting", "ready", "failed", "expired"}})},
	"GET " + sbPath + "/filesystem/files":       {requiredQP("path")},
	"DELETE " + sbPath + "/filesystem/files":    {requiredQP("path")},
	"GET " + sbPath + "/filesystem/directories": {qp("path", "string", map[string]any{"default": "."})},
	"GET " + sbPath + "/filesystem/download":    {requiredQP("path")},
	"GET " + sbPath + "/history": {qp("exec_type", "string", map[string]any{"enum": service.ExecTypes}), qp("success_only", "boolean", nil),
		qp("limit", "integer", map[string]any{"minimum": 1, "maximum": 500, "default": 100}), qp("offset", "integer", map[string]any{"minimum": 0}),
		qp("tags", "string", nil), qp("has_notes", "boolean", nil), qp("has_description", "boolean", nil)},
	"GET /v1/cargos": {qp("limit", "integer", map[string]any{"minimum": 1, "maximum": 200}), qp("cursor", "string", nil), qp("managed", "boolean", nil)},
	"GET " + sbPath + "/processes/{pid}/output": {qp("since", "string", map[string]any{"description": "cursor <stdout>:<stderr> or an event id; Last-Event-ID works too"})},
}

func obj(required []string, props map[string]any) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func body(schema any) map[string]any {
	return map[string]any{"required": true, "content": jsonContent(schema)}
}

var (
	str           = map[string]any{"type": "string"}
	nullStr       = map[string]any{"type": []string{"string", "null"}}
	boolean       = map[string]any{"type": "boolean"}
	integer       = map[string]any{"type": "integer"}
	execMetaProps = map[string]any{"include_code": boolean, "description": nullStr, "tags": nullStr}
	timeout       = map[string]any{"type": "integer", "minimum": 1, "maximum": 300, "default": 30}
)

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

var requestBodies = map[string]any{
	"POST /v1/sandboxes": body(obj(nil, map[string]any{"profile": map[string]any{"type": "string", "default": DefaultProfile},
		"cargo_id": nullStr, "ttl": map[string]any{"type": []string{"integer", "null"}, "minimum": 0, "description": "seconds; null or 0: never expires"}})),
	"POST " + sbPath + "/extend_ttl":  body(obj([]string{"extend_by"}, map[string]any{"extend_by": map[string]any{"type": "integer", "exclusiveMinimum": 0}})),
	"POST " + sbPath + "/python/exec": body(obj([]string{"code"}, merge(execMetaProps, map[string]any{"code": str, "timeout": timeout}))),
	"POST " + sbPath + "/shell/exec": body(obj([]string{"command"}, merge(execMetaProps, map[string]any{"command": str, "timeout": timeout,
		"cwd": map[string]any{"type": []string{"string", "null"}, "description": "relative to /workspace"}}))),
	"POST " + sbPath + "/browser/exec": body(obj([]string{"cmd"}, merge(execMetaProps, map[string]any{"cmd": str, "timeout": timeout, "learn": boolean, "include_trace": boolean}))),
	"POST " + sbPath + "/browser/exec_batch": body(obj([]string{"commands"}, merge(execMetaProps, map[string]any{
		"commands": map[string]any{"type": "array", "items": str, "minItems": 1},
		"timeout":  map[string]any{"type": "integer", "minimum": 1, "maximum": 600, "default": 60}, "stop_on_error": boolean,
		"learn": boolean, "include_trace": boolean}))),
	"PUT " + sbPath + "/filesystem/files": body(obj([]string{"path", "content"}, map[string]any{"path": str, "content": str})),
	"POST " + sbPath + "/filesystem/upload": map[string]any{"required": true, "content": map[string]any{"multipart/form-data": map[string]any{
		"schema": obj([]string{"file", "path"}, map[string]any{"file": map[string]any{"type": "string", "format": "binary"}, "path": str})}}},
	"PATCH " + sbPath + "/history/{eid}": body(obj(nil, map[string]any{"description": nullStr, "tags": nullStr, "notes": nullStr})),
	"POST /v1/cargos":                    body(obj(nil, map[string]any{"size_limit_mb": map[string]any{"type": "integer", "minimum": 1, "maximum": 65536}})),
	"POST " + sbPath + "/shell/exec/stream": body(obj([]string{"command"}, map[string]any{"command": str, "cwd": nullStr,
		"timeout": map[string]any{"type": "integer", "minimum": 1, "maximum": 86400, "default": 30}})),
	"POST " + sbPath + "/processes/{pid}/signal": body(obj(nil, map[string]any{"signal": map[string]any{"type": "string", "enum": signals, "default": "TERM"}})),
	"POST " + sbPath + "/pty":                    body(obj(nil, map[string]any{"command": str, "cwd": str, "cols": integer, "rows": integer})),
	"POST " + sbPath + "/tickets": body(obj(nil, map[string]any{"scope": map[string]any{"type": "string", "enum": service.TicketScopes, "default": "app"}, "ttl": integer,
		"permission": map[string]any{"type": "string", "enum": []string{"read", "write"}, "default": "read"}})),
}

var successSchemas = map[string]any{
	"GET /health":                           obj([]string{"status", "version"}, map[string]any{"status": str, "version": str}),
	"POST /v1/sandboxes":                    ref("SandboxResponse"),
	"GET " + sbPath:                         ref("SandboxResponse"),
	"POST " + sbPath + "/extend_ttl":        ref("SandboxResponse"),
	"GET /v1/sandboxes":                     obj([]string{"items", "next_cursor"}, map[string]any{"items": map[string]any{"type": "array", "items": ref("SandboxResponse")}, "next_cursor": nullStr}),
	"GET " + sbPath + "/filesystem/files":   obj([]string{"content"}, map[string]any{"content": str}),
	"GET " + sbPath + "/history/last":       ref("HistoryEntry"),
	"GET " + sbPath + "/history/{eid}":      ref("HistoryEntry"),
	"PATCH " + sbPath + "/history/{eid}":    ref("HistoryEntry"),
	"POST /v1/cargos":                       ref("Cargo"),
	"GET /v1/cargos/{cid}":                  ref("Cargo"),
	"POST " + sbPath + "/shell/exec":        ref("ShellExecResult"),
	"POST " + sbPath + "/python/exec":       ref("PythonExecResult"),
	"POST " + sbPath + "/filesystem/upload": obj([]string{"status", "path", "size"}, map[string]any{"status": str, "path": str, "size": integer}),
}

var schemas = map[string]any{
	"ErrorResponse": obj([]string{"error"}, map[string]any{"error": obj([]string{"code", "message", "request_id", "details"}, map[string]any{
		"code": str, "message": str, "request_id": str, "details": map[string]any{"type": "object"}})}),
	"HTTPValidationError": obj([]string{"detail"}, map[string]any{"detail": map[string]any{"type": "array", "items": obj([]string{"type", "loc", "msg"}, map[string]any{
		"type": str, "loc": map[string]any{"type": "array"}, "msg": str, "input": map[string]any{}, "ctx": map[string]any{"type": "object"}})}}),
	"SandboxResponse": obj([]string{"id", "status", "profile", "cargo_id", "capabilities", "created_at", "expires_at", "idle_expires_at", "containers"}, map[string]any{
		"id": str, "status": map[string]any{"type": "string", "enum": []string{"idle", "starting", "ready", "failed", "expired"}},
		"profile": str, "cargo_id": nullStr, "capabilities": map[string]any{"type": "array", "items": str},
		"created_at": map[string]any{"type": "string", "format": "date-time"}, "expires_at": nullStr, "idle_expires_at": nullStr,
		"containers": map[string]any{"type": []string{"array", "null"}}, "last_error": nullStr}),
	"HistoryEntry": obj([]string{"id", "exec_type", "code", "success", "created_at"}, map[string]any{
		"id": str, "session_id": nullStr, "exec_type": str, "code": str, "success": boolean, "execution_time_ms": integer,
		"output": nullStr, "error": nullStr, "description": nullStr, "tags": nullStr, "notes": nullStr, "created_at": str}),
	"Cargo": obj([]string{"id", "managed", "backend", "size_limit_mb", "created_at"}, map[string]any{
		"id": str, "managed": boolean, "managed_by_sandbox_id": nullStr, "backend": str, "size_limit_mb": integer,
		"created_at": str, "last_accessed_at": str}),
	"ShellExecResult": obj([]string{"success", "output", "exit_code", "execution_id"}, map[string]any{
		"success": boolean, "output": str, "error": nullStr, "exit_code": integer, "execution_id": str, "execution_time_ms": integer, "command": nullStr}),
	"PythonExecResult": obj([]string{"success", "output", "data", "execution_id"}, map[string]any{
		"success": boolean, "output": str, "error": nullStr, "execution_id": str, "execution_time_ms": integer, "code": nullStr,
		"data": obj(nil, map[string]any{"execution_count": integer, "output": obj(nil, map[string]any{"text": str,
			"images": map[string]any{"type": "array", "items": obj(nil, map[string]any{"image/png": str})}})})}),
}
