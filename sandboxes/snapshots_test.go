package sandboxes

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateSnapshotName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"before upgrade", true},
		{"état-1 ✓", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"line\nbreak", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"\xff\xfe", false},
	} {
		if err := ValidateSnapshotName(tc.name); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func FuzzValidateSnapshotName(f *testing.F) {
	for _, s := range []string{"", "a", "before upgrade", "line\nbreak", "\xff", strings.Repeat("é", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateSnapshotName(name)
		if err != nil && ErrorCode(err) != CodeInvalid {
			t.Fatalf("untyped error %v", err)
		}
		if err == nil && (len(name) > 128 || !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\n\r\x7f")) {
			t.Fatalf("accepted %q", name)
		}
	})
}

func TestLifecycleProfileValidation(t *testing.T) {
	for _, tc := range []struct {
		p  Profile
		ok bool
	}{
		{Profile{ID: "a", Image: "i"}, true},
		{Profile{ID: "a", Image: "i", IdleAction: IdleActionPause}, true},
		{Profile{ID: "a", Image: "i", IdleAction: IdleActionPause, PauseTimeout: Duration(60e9)}, true},
		{Profile{ID: "a", Image: "i", IdleAction: "hibernate"}, false},
		{Profile{ID: "a", Image: "i", PauseTimeout: Duration(60e9)}, false},
		{Profile{ID: "a", Image: "i", IdleAction: IdleActionPause, PauseTimeout: -1}, false},
	} {
		if err := tc.p.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
	// Lifecycle settings do not reshape containers: the warm pool survives a change of them.
	a := Profile{ID: "a", Image: "i"}
	b := Profile{ID: "a", Image: "i", IdleAction: IdleActionPause, PauseTimeout: Duration(60e9)}
	if a.Hash() != b.Hash() {
		t.Error("idle_action changed the profile hash")
	}
}
