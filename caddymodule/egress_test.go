package caddymodule_test

import (
	"strings"
	"testing"
)

// TestEgressCaddyfileErrors: a wrong sandbox_egress limit is an adapt error, never a silent default.
func TestEgressCaddyfileErrors(t *testing.T) {
	site := func(block string) string { return ":3128 {\n\tsandbox_egress {\n" + block + "\n\t}\n}\n" }
	limit := func(opt string) string {
		return "{\n\tservers :3128 {\n\t\tlistener_wrappers {\n\t\t\tsandbox_egress_limit {\n\t\t\t\t" + opt +
			"\n\t\t\t}\n\t\t}\n\t}\n}\n\n" + site("")
	}
	for _, tc := range []struct {
		name, caddyfile, want string
	}{
		{"zero tunnels", site("\t\tmax_tunnels 0"), "max_tunnels: want a positive number"},
		{"tunnels not a number", site("\t\tmax_tunnels many"), "max_tunnels: want a positive number"},
		{"negative idle", site("\t\tidle_timeout -1s"), "idle_timeout must be a positive duration"},
		{"idle without value", site("\t\tidle_timeout"), "wrong argument count"},
		{"unknown", site("\t\tmax_conns 3"), `unknown option "max_conns"`},
		{"zero per source", limit("max_conns_per_source 0"), "max_conns_per_source: want a positive number"},
		{"unknown limit option", limit("max_conns 3"), `sandbox_egress_limit: unknown option "max_conns"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adaptToJSON(tc.caddyfile)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}
