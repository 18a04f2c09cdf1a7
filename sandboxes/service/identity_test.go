package service

import "testing"

// TestKeyRing: configured keys resolve to their owners (default when unnamed) and scopes; a wrong key, a key's
// hash or an empty key resolves to nobody, and an empty configured key is refused.
func TestKeyRing(t *testing.T) {
	ring, err := NewKeyRing([]KeyConfig{{Key: "k-alice", Owner: "alice"}, {Key: "k-default"}, {Key: "k-ops", Owner: "ops", Admin: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		want  Principal
		ok    bool
	}{
		{"k-alice", Principal{Owner: "alice"}, true},
		{"k-default", Principal{Owner: DefaultOwner}, true},
		{"k-ops", Principal{Owner: "ops", Admin: true}, true},
		{"k-alice ", Principal{}, false},
		{HashKey("k-alice"), Principal{}, false},
		{"", Principal{}, false},
	} {
		if got, ok := ring.Lookup(tc.token); ok != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v %v", tc.token, got, ok, tc.want, tc.ok)
		}
	}
	if ring.Len() != 3 {
		t.Errorf("len %d", ring.Len())
	}
	if _, err := NewKeyRing([]KeyConfig{{Key: "a"}, {Key: ""}}); err == nil {
		t.Errorf("an empty key was accepted")
	}
}

func TestParseKeyLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want KeyConfig
		ok   bool
	}{
		{[]string{"k", "alice"}, KeyConfig{Key: "k", Owner: "alice"}, true},
		{[]string{"k", "ops", "admin"}, KeyConfig{Key: "k", Owner: "ops", Admin: true}, true},
		{[]string{"k"}, KeyConfig{}, false},
		{[]string{"k", "ops", "root"}, KeyConfig{}, false},
		{[]string{"k", "ops", "admin", "x"}, KeyConfig{}, false},
	} {
		got, err := ParseKeyLine(tc.args)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v", tc.args, got, err)
		}
	}
}

func TestParseConsoleKeyLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want KeyConfig
		ok   bool
	}{
		{[]string{"k"}, KeyConfig{Key: "k"}, true},
		{[]string{"k", "owner", "alice", "admin"}, KeyConfig{Key: "k", Owner: "alice", Admin: true}, true},
		{[]string{"k", "admin", "owner", "ops"}, KeyConfig{Key: "k", Owner: "ops", Admin: true}, true},
		{nil, KeyConfig{}, false},
		{[]string{"k", "owner"}, KeyConfig{}, false},
		{[]string{"k", "root"}, KeyConfig{}, false},
	} {
		got, err := ParseConsoleKeyLine(tc.args)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v", tc.args, got, err)
		}
	}
}
