package fastgpt

import (
	"testing"
	"time"
)

// TestParseSeconds: whole seconds as the original's variables give them, or the gateway's duration syntax; zero,
// negative and garbage are errors, which LenientSeconds turns into the default (0).
func TestParseSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"10", 10 * time.Second, true},
		{"1m30s", 90 * time.Second, true},
		{"0", 0, false},
		{"-5", 0, false},
		{"-1s", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	} {
		got, err := ParseSeconds(tc.in, time.ParseDuration)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSeconds(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
		if lenient := LenientSeconds(tc.in, time.ParseDuration); lenient != tc.want {
			t.Errorf("LenientSeconds(%q) = %v, want %v", tc.in, lenient, tc.want)
		}
	}
}
