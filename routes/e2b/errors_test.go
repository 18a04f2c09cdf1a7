package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// serviceCodes are the service's own codes (sandboxes/service/errors.go); the core's come from ErrorCodes.
var serviceCodes = []string{
	service.CodeValidation, service.CodeCapability, service.CodeNotFound, service.CodeSandboxExpired,
	service.CodeTTLInfinite, service.CodeQuotaExceeded, service.CodeSessionNotReady, service.CodeTimeout,
	service.CodeContainerDied, service.CodeInvalidPath, service.CodeUnauthorized, service.CodeForbidden,
	service.CodeFileNotFound, service.CodeConflict, service.CodeInternal, service.CodeShipError,
	service.CodePayloadTooLarge, service.CodeRateLimited, service.CodeNoSpace, service.CodeStorageFull,
}

// TestErrorTable walks every code of the core (sandboxes.ErrorCodes) and of the service: each has a row in the one
// table, and its answer is E2B's body whose numeric code equals the HTTP status (what the SDK reads).
func TestErrorTable(t *testing.T) {
	for _, code := range serviceCodes {
		if _, ok := statusOf[code]; !ok {
			t.Errorf("service code %q has no E2B status", code)
		}
	}
	for _, code := range sandboxes.ErrorCodes() {
		se := service.AsError(sandboxes.Errorf(code, "x"))
		if _, ok := statusOf[se.Code]; !ok {
			t.Errorf("core code %q (service %q) has no E2B status", code, se.Code)
		}
		e := toError(fmt.Errorf("wrapped: %w", sandboxes.Errorf(code, "x")))
		w := httptest.NewRecorder()
		writeError(w, e)
		var body struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Code != w.Code || body.Message == "" {
			t.Errorf("%s: answered %d %s", code, w.Code, w.Body.String())
		}
	}
	for _, tc := range []struct {
		err    error
		status int
	}{
		{sandboxes.Errorf(sandboxes.CodeNotFound, "x"), http.StatusNotFound},
		{sandboxes.Errorf(sandboxes.CodeExpired, "x"), http.StatusNotFound},
		{sandboxes.Errorf(sandboxes.CodeUnknownProfile, "x"), http.StatusBadRequest},
		{sandboxes.Errorf(sandboxes.CodeQuotaExceeded, "x"), http.StatusTooManyRequests},
		{sandboxes.Errorf(sandboxes.CodeInvalidState, "x"), http.StatusConflict},
		{sandboxes.Errorf(sandboxes.CodeNotReady, "x"), http.StatusServiceUnavailable},
		{context.DeadlineExceeded, http.StatusGatewayTimeout},
		{fmt.Errorf("boom"), http.StatusInternalServerError},
		{errorf(http.StatusConflict, "own"), http.StatusConflict},
	} {
		if got := toError(tc.err); got.Status != tc.status {
			t.Errorf("%v -> %d, want %d", tc.err, got.Status, tc.status)
		}
	}
	// A 429 carries Retry-After in whole seconds: the SDK retries only then.
	w := httptest.NewRecorder()
	writeError(w, toError(sandboxes.Errorf(sandboxes.CodeQuotaExceeded, "x")))
	if w.Header().Get("Retry-After") == "" {
		t.Error("a 429 without Retry-After")
	}
	// An internal error's text stays in the log.
	if e := toError(fmt.Errorf("secret path /var/lib/x")); e.Message != "internal error" {
		t.Errorf("internal error answered %q", e.Message)
	}
}
