package caddymodule_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// TestAdminAPIErrorsOnTheGateway asks a real gateway's admin endpoint what its errors look like: Caddy's envelope
// with routes/admin's statuses, an expired sandbox 409 (as the Bay API answers it; it was a 500).
func TestAdminAPIErrorsOnTheGateway(t *testing.T) {
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sga")
	testenv.RemoveNamespace(t, ns)
	echo := echoServer(t)
	g := testenv.StartGateway(t, gatewayCaddyfile("256m", "10m"), testenv.GatewayOptions{Env: []string{
		"SG_IMAGE=" + image, "SG_NS=" + ns, fmt.Sprintf("SG_PORT=%d", testenv.FreePort(t)), "SG_ECHO=" + strings.TrimPrefix(echo.URL, "http://"),
	}})

	// The status is computed on read, and the collector (gc_interval 1h) leaves the expired sandbox in place.
	sb := createSandbox(t, g, "1s")
	waitStatus(t, g, sb.ID, sandboxes.StatusExpired)

	for _, tc := range []struct {
		method, path string
		body         any
		want         int
		says         string
	}{
		{http.MethodPost, "/sandboxes/" + sb.ID + "/resume", nil, http.StatusConflict, sandboxes.CodeExpired},
		{http.MethodGet, "/sandboxes/no-such-sandbox", nil, http.StatusNotFound, sandboxes.CodeNotFound},
		{http.MethodPost, "/sandboxes", map[string]any{"profile": "no-such-profile"}, http.StatusBadRequest, sandboxes.CodeUnknownProfile},
		{http.MethodPost, "/sandboxes/" + sb.ID + "/teleport", nil, http.StatusNotFound, "unknown sandbox action"},
		{http.MethodPut, "/sandboxes/" + sb.ID, nil, http.StatusMethodNotAllowed, "not allowed"},
	} {
		code, body := adminDo(t, g, tc.method, tc.path, tc.body)
		if code != tc.want || !strings.Contains(string(body), `"error":`) || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s %s: %d %s, want %d saying %q", tc.method, tc.path, code, body, tc.want, tc.says)
		}
	}
}
