package testenv

import "testing"

// TestRunscRequired: which environments make a missing runsc a failure rather than a skip.
func TestRunscRequired(t *testing.T) {
	for _, c := range []struct {
		require, ci string
		want        bool
	}{
		{"", "", false},
		{"1", "", true},
		{"0", "true", false}, // an explicit SANDGATE_REQUIRE_RUNSC wins
		{"", "true", true},
		{"", "1", true},
		{"", "false", false},
		{"", "0", false},
		{"yes", "", true},
	} {
		t.Setenv("SANDGATE_REQUIRE_RUNSC", c.require)
		t.Setenv("CI", c.ci)
		if got := RunscRequired(); got != c.want {
			t.Errorf("SANDGATE_REQUIRE_RUNSC=%q CI=%q: %v, want %v", c.require, c.ci, got, c.want)
		}
	}
}
