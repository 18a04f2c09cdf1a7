package bayapi

import (
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestLifecycleOpsWithoutBackend: a backend without pause or snapshots answers every new route with a typed
// capability_not_supported (never a 404 or a 500); the routes are in the OpenAPI document; a create naming both a
// cargo and a snapshot is refused.
func TestLifecycleOpsWithoutBackend(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, nil)
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/sandboxes/" + id + "/pause"},
		{"POST", "/v1/sandboxes/" + id + "/resume"},
		{"POST", "/v1/sandboxes/" + id + "/snapshots"},
		{"GET", "/v1/sandboxes/" + id + "/snapshots"},
		{"POST", "/v1/sandboxes/" + id + "/fork"},
		{"GET", "/v1/snapshots"},
		{"GET", "/v1/snapshots/snap-000000000000"},
		{"DELETE", "/v1/snapshots/snap-000000000000"},
		{"POST", "/v1/sandboxes"}, // with snapshot_id
	} {
		var body map[string]any
		if tc.path == "/v1/sandboxes" {
			body = map[string]any{"snapshot_id": "snap-000000000000"}
		}
		st, out, _ := a.call(t, tc.method, tc.path, keyAlice, body)
		if st != 400 || errCode(out) != service.CodeCapability {
			t.Errorf("%s %s: %d %v", tc.method, tc.path, st, out)
		}
	}
	st, out, _ := a.call(t, "POST", "/v1/sandboxes", keyAlice, map[string]any{"snapshot_id": "snap-000000000000", "cargo_id": "ws-000000000000"})
	if st != 400 || errCode(out) != service.CodeValidation {
		t.Errorf("cargo and snapshot: %d %v", st, out)
	}
	st, out, _ = a.call(t, "GET", "/v1/openapi.json", "", nil)
	doc, _ := out["paths"].(map[string]any)
	for _, p := range []string{"/v1/sandboxes/{id}/pause", "/v1/sandboxes/{id}/fork", "/v1/snapshots/{sid}"} {
		if _, ok := doc[p]; st != 200 || !ok {
			t.Errorf("openapi lacks %s", p)
		}
	}
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes?status=paused", keyAlice, nil); st != 200 {
		t.Errorf("status filter paused: %d", st)
	}
	if st, out, _ := a.call(t, "GET", "/v1/sandboxes?status=frozen", keyAlice, nil); st != 422 || !strings.Contains(strings.ToLower(errText(out)), "paused") {
		t.Errorf("status filter frozen: %d %v", st, out)
	}
}

func errText(out map[string]any) string {
	d, _ := out["detail"].([]any)
	if len(d) == 0 {
		return ""
	}
	m, _ := d[0].(map[string]any)
	s, _ := m["msg"].(string)
	return s
}
