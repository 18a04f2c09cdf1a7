package caddymodule_test

import (
	"strings"
	"testing"
)

// warm_refill_hold takes a positive duration or off (a negative duration in JSON: refill at once).
func TestWarmRefillHoldOption(t *testing.T) {
	for _, tc := range []struct {
		value   string
		wantOK  bool
		wantStr string // what the JSON holds, if ok
	}{
		{"250ms", true, `"warm_refill_hold": 250000000`},
		{"off", true, `"warm_refill_hold": -1`},
		{"0s", false, ""},
		{"-1s", false, ""},
		{"soon", false, ""},
	} {
		t.Run(tc.value, func(t *testing.T) {
			out, err := adaptToJSON("{\n\tadmin off\n\tsandboxes {\n\t\twarm_refill_hold " + tc.value + "\n\t}\n}\n")
			if (err == nil) != tc.wantOK {
				t.Fatalf("adapting warm_refill_hold %s: %v", tc.value, err)
			}
			if tc.wantOK && !strings.Contains(out, tc.wantStr) {
				t.Fatalf("warm_refill_hold %s adapted to:\n%s", tc.value, out)
			}
		})
	}
}
