package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// adminAnswers is the admin endpoint's status for each core error code. A code the core adds fails
// TestErrorForEveryCoreCode until it gets a row here and in lifecycleStatus.
var adminAnswers = map[string]int{
	sandboxes.CodeNotFound:         404,
	sandboxes.CodeSnapshotNotFound: 404,
	sandboxes.CodeUnknownProfile:   400,
	sandboxes.CodeInvalid:          400,
	sandboxes.CodeCapabilityAbsent: 400,
	sandboxes.CodeImageNotAllowed:  403,
	sandboxes.CodeExpired:          409, // was 500 before the table: unmapped
	sandboxes.CodeTTLInfinite:      409,
	sandboxes.CodeInvalidState:     409,
	sandboxes.CodeContainerDied:    410,
	sandboxes.CodeSnapshotTooLarge: 413,
	sandboxes.CodeQuotaExceeded:    429,
	sandboxes.CodeEngine:           500,
	sandboxes.CodeStartupFailed:    502,
	sandboxes.CodeNotReady:         503,
	sandboxes.CodeTimeout:          504,
}

func TestErrorForEveryCoreCode(t *testing.T) {
	for _, code := range sandboxes.ErrorCodes() {
		want, ok := adminAnswers[code]
		if !ok {
			t.Errorf("core code %q has no admin answer", code)
			continue
		}
		err := fmt.Errorf("deleting: %w", sandboxes.Errorf(code, "refused"))
		got := ErrorFor(err)
		if got.Status != want || got.Error() != err.Error() || !errors.Is(got, err) {
			t.Errorf("ErrorFor(%s) = %d %q, want %d with the error's own text", code, got.Status, got.Error(), want)
		}
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("listing: %w", context.DeadlineExceeded), 504},
		{errors.New("store closed"), 500},
	} {
		if got := ErrorFor(tc.err); got.Status != tc.want {
			t.Errorf("ErrorFor(%v) = %d, want %d", tc.err, got.Status, tc.want)
		}
	}
}

// TestRoutesWithoutManager: with no sandboxes app running every route answers 404, and a wrong method 405 before
// the Manager is needed where the route checks it first.
func TestRoutesWithoutManager(t *testing.T) {
	h := &Handler{Manager: func() *sandboxes.Manager { return nil }}
	for _, rt := range h.Routes() {
		r := httptest.NewRequest(http.MethodGet, rt.Pattern, nil)
		var ae *Error
		if err := rt.Handler(httptest.NewRecorder(), r); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			t.Errorf("GET %s without a Manager: %v", rt.Pattern, err)
		}
	}
	var ae *Error
	if err := h.pools(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/sandbox-pools", nil)); !errors.As(err, &ae) ||
		ae.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /sandbox-pools: %v", err)
	}
}
