package caddymodule

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/routes/admin"
	"github.com/sandgate/sandgate/sandboxes"
)

// TestAdminAPIErrors checks what Caddy's admin server is handed for every core error code: a caddy.APIError with
// routes/admin's status and the core error itself (its text is the answer's message), and the plain 404 of a
// gateway whose sandboxes app is not running.
func TestAdminAPIErrors(t *testing.T) {
	for _, code := range sandboxes.ErrorCodes() {
		core := sandboxes.Errorf(code, "refused")
		h := adminHandler(func(http.ResponseWriter, *http.Request) error { return admin.ErrorFor(core) })
		err := h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/sandboxes/x", nil))
		var api caddy.APIError
		if !errors.As(err, &api) || api.HTTPStatus != admin.ErrorFor(core).Status || !errors.Is(api.Err, core) {
			t.Errorf("%s: handed %#v", code, err)
		}
		if code == sandboxes.CodeExpired && api.HTTPStatus != http.StatusConflict {
			t.Errorf("sandbox_expired answered %d, want 409 as the Bay API answers it", api.HTTPStatus)
		}
	}
	// A running gateway in this test process would be found; there is none.
	if runningManager() != nil {
		t.Skip("a sandboxes app runs in this process")
	}
	for _, rt := range new(AdminAPI).Routes() {
		err := rt.Handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, rt.Pattern, nil))
		var api caddy.APIError
		if !errors.As(err, &api) || api.HTTPStatus != http.StatusNotFound {
			t.Errorf("%s without a running sandboxes app: %#v", rt.Pattern, err)
		}
	}
}
