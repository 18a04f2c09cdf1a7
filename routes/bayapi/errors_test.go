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
