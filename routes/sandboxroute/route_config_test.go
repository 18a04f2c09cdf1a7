package sandboxroute

import "testing"

// TestNewRoute: a fixed port only on app routes and within 1-65535; an unknown kind is refused.
func TestNewRoute(t *testing.T) {
	for _, tc := range []struct {
		kind string
		port int
		ok   bool
	}{
		{"app", 8080, true}, {"app", 0, true}, {"terminal", 0, true},
		{"terminal", 3000, false}, {"app", 65536, false}, {"app", -1, false}, {"shell", 0, false},
	} {
		r, err := NewRoute(nil, tc.kind, tc.port, 0)
		if (err == nil) != tc.ok || tc.ok && (string(r.Kind) != tc.kind || r.Port != tc.port) {
			t.Errorf("%s %d: %+v, %v", tc.kind, tc.port, r, err)
		}
	}
}
