package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestExportsOptionParsing: good values land in ExportOptions and become the service's ExportLimits, bad ones are
// Caddyfile errors, and unset ones take the defaults.
func TestExportsOptionParsing(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    ExportOptions
		limits  sandboxes.ExportLimits
	}{
		{in: "exports {\nmax_per_owner 500\nquota 2m\nttl 1d\n}", want: ExportOptions{MaxPerOwner: 500, Quota: "2m", TTL: 86400e9},
			limits: sandboxes.ExportLimits{MaxPerOwner: 500, MaxBytesPerOwner: 2 << 20, TTL: 24 * time.Hour}},
		{in: "exports {\nttl 30m\n}", want: ExportOptions{TTL: 1800e9}, limits: sandboxes.ExportLimits{TTL: 30 * time.Minute}},
		{in: "exports {\nmax_per_owner -1\n}", err: "must not be negative"},
		{in: "exports {\nttl -1h\n}", err: "must not be negative"},
		{in: "exports {\nttl soon\n}", err: "not a duration"},
		{in: "exports {\nquota lots\n}", err: "lots"},
		{in: "exports {\nmax_paths 3\n}", err: "unknown exports option"},
		{in: "exports 3", err: "wrong argument count"},
	} {
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		app := new(App)
		err := parseExportsOption(app)(d)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || *app.Exports != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, app.Exports, err, tc.want)
			continue
		}
		if got, err := app.Exports.limits(); err != nil || got != tc.limits {
			t.Errorf("%q: limits %+v, want %+v", tc.in, got, tc.limits)
		}
	}
	var none *ExportOptions
	if l, err := none.limits(); err != nil || l != (sandboxes.ExportLimits{}) {
		t.Errorf("no exports block: %+v", l)
	}
	for _, bad := range []*ExportOptions{{MaxPerOwner: -1}, {Quota: "x"}, {TTL: -1}} {
		if _, err := bad.limits(); err == nil {
			t.Errorf("%+v passed validation", *bad)
		}
	}
}
