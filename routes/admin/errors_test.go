package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestErrorForEveryCoreCode walks every core error code: each is answered with the edge's status (the edge's own
// test pins those), none falls through to the 500 of an unexpected failure, and sandbox_expired is 409 (it was an
// unmapped 500 here).
func TestErrorForEveryCoreCode(t *testing.T) {
	for _, code := range sandboxes.ErrorCodes() {
		want, ok := sandboxroute.StatusOf(code)
		if !ok {
			t.Errorf("core code %q has no status", code)
			continue
		}
		err := fmt.Errorf("deleting: %w", sandboxes.Errorf(code, "refused"))
		got := ErrorFor(err)
		if got.Status != want || got.Error() != err.Error() || !errors.Is(got, err) {
			t.Errorf("ErrorFor(%s) = %d %q, want %d with the error's own text", code, got.Status, got.Error(), want)
		}
	}
	if got := ErrorFor(sandboxes.Errorf(sandboxes.CodeExpired, "gone")); got.Status != http.StatusConflict {
		t.Errorf("sandbox_expired: %d, want 409", got.Status)
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
	h := &Handler{Service: func() *service.Service { return nil }}
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

// TestErrorForEveryServiceCode: the service's checks the operator meets (an expired sandbox, a missing snapshot)
// carry the core's codes and are answered with the edge's status for them; the service's own codes are 500s.
func TestErrorForEveryServiceCode(t *testing.T) {
	for _, code := range service.ErrorCodes() {
		want, ok := sandboxroute.StatusOf(code)
		if !ok {
			want = http.StatusInternalServerError
		}
		if got := ErrorFor(fmt.Errorf("pausing: %w", service.Errorf(code, "refused"))); got.Status != want {
			t.Errorf("ErrorFor(service %s) = %d, want %d", code, got.Status, want)
		}
	}
}
