package bayapi

import (
	"context"
	"fmt"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestErrorMapping pins how lifecycle and agent errors become Bay's codes and statuses.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		err    error
		code   string
		status int
	}{
		{sandboxes.Errorf(sandboxes.CodeNotFound, "x"), "not_found", 404},
		{sandboxes.Errorf(sandboxes.CodeUnknownProfile, "x"), "validation_error", 400},
		{sandboxes.Errorf(sandboxes.CodeQuotaExceeded, "x"), "quota_exceeded", 429},
		{sandboxes.Errorf(sandboxes.CodeContainerDied, "x"), "container_died", 410},
		{sandboxes.Errorf(sandboxes.CodeTimeout, "x"), "timeout", 504},
		{sandboxes.Errorf(sandboxes.CodeExpired, "x"), "sandbox_expired", 409},
		{sandboxes.Errorf(sandboxes.CodeTTLInfinite, "x"), "sandbox_ttl_infinite", 409},
		{sandboxes.Errorf(sandboxes.CodeNotReady, "x"), "session_not_ready", 503},
		{sandboxes.Errorf(sandboxes.CodeInvalid, "x"), "validation_error", 400},
		{sandboxes.Errorf(sandboxes.CodeEngine, "x"), "internal_error", 500},
		{sandboxes.Errorf(sandboxes.CodeStartupFailed, "x"), "ship_error", 502},
		{fmt.Errorf("creating: %w", sandboxes.Errorf(sandboxes.CodeStorageFull, "x")), "storage_full", 507},
		{fmt.Errorf("wrapped: %w", sandboxes.Errorf(sandboxes.CodeNotFound, "x")), "not_found", 404},
		{agentapi.Errorf(agentapi.CodeFileNotFound, "x"), "file_not_found", 404},
		{agentapi.Errorf(agentapi.CodeNotFound, "no route POST /v1/x"), "ship_error", 502},
		{agentapi.Errorf(agentapi.CodeNotFound, "no process p1"), "not_found", 404},
		{agentapi.Errorf(agentapi.CodeInvalidPath, "x"), "invalid_path", 400},
		{agentapi.Errorf(agentapi.CodeTooLarge, "x"), "payload_too_large", 413},
		{agentapi.Errorf(agentapi.CodeNoSpace, "x"), "ship_error", 507},
		{agentapi.Errorf(agentapi.CodeTimeout, "x"), "timeout", 504},
		{agentapi.Errorf(agentapi.CodeInternal, "x"), "ship_error", 502},
		// A redirect (or a request to another host) the gateway's agent client refused: the runtime misbehaving.
		{agentapi.Errorf(agentapi.CodeBadReply, "x"), "ship_error", 502},
		{context.DeadlineExceeded, "timeout", 504},
		{fmt.Errorf("boom"), "internal_error", 500},
	}
	for _, tc := range tests {
		w := wire(service.AsError(tc.err))
		if w.code != tc.code || w.status != tc.status {
			t.Errorf("%v -> %s %d, want %s %d", tc.err, w.code, w.status, tc.code, tc.status)
		}
	}
}

// TestEveryCodeMapped walks every code the core and the service can carry: each has a row in Bay's one table
// (codeWire), reached through service.AsError, and only internal_error answers 500, with the core's two failures
// of the gateway's own setup (its engine, a profile's image missing from it), which the service reports as
// internal_error. A new code without a row fails here.
func TestEveryCodeMapped(t *testing.T) {
	for _, code := range service.ErrorCodes() {
		w, ok := codeWire[code]
		if !ok {
			t.Errorf("service code %q has no row in codeWire", code)
			continue
		}
		if w.status == 500 && code != service.CodeInternal {
			t.Errorf("service code %q answers 500", code)
		}
	}
	for _, code := range sandboxes.ErrorCodes() {
		e := service.AsError(sandboxes.Errorf(code, "x"))
		if _, ok := codeWire[e.Code]; !ok {
			t.Errorf("core code %q becomes %q, which has no row in codeWire", code, e.Code)
		}
		if wire(e).status == 500 && code != sandboxes.CodeEngine && code != sandboxes.CodeImageNotFound {
			t.Errorf("core code %q answers 500", code)
		}
	}
}
