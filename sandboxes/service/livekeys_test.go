package service

import (
	"context"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// TestLiveKeys: no key is accepted before a ring is stored, a stored ring replaces the last one for every reader,
// and KeyAllows admits a key only on sandboxes its principal sees.
func TestLiveKeys(t *testing.T) {
	ctx := context.Background()
	svc := New(Config{Sandboxes: sandboxestest.New(nil,
		sandboxes.Sandbox{ID: "sb-a", Owner: "alice", Status: sandboxes.StatusReady})})
	keys := new(LiveKeys)
	if svc.KeyAllows(ctx, keys, "sk-alice", "sb-a") {
		t.Fatal("a key accepted before any ring was stored")
	}
	first, err := NewKeyRing([]KeyConfig{{Key: "sk-alice", Owner: "alice"}, {Key: "sk-bob", Owner: "bob"}, {Key: "sk-ops", Owner: "ops", Admin: true}})
	if err != nil {
		t.Fatal(err)
	}
	keys.Store(first)
	for _, tc := range []struct {
		token, id string
		want      bool
	}{
		{"sk-alice", "sb-a", true}, {"sk-ops", "sb-a", true}, {"sk-bob", "sb-a", false},
		{"sk-alice", "sb-missing", false}, {"sk-nobody", "sb-a", false},
	} {
		if got := svc.KeyAllows(ctx, keys, tc.token, tc.id); got != tc.want {
			t.Errorf("KeyAllows(%s, %s) = %v, want %v", tc.token, tc.id, got, tc.want)
		}
		if got := (KeyGate{Service: svc, Keys: keys}).KeyAllows(ctx, tc.token, tc.id); got != tc.want {
			t.Errorf("KeyGate.KeyAllows(%s, %s) = %v, want %v", tc.token, tc.id, got, tc.want)
		}
	}
	second, err := NewKeyRing([]KeyConfig{{Key: "sk-alice2", Owner: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	keys.Store(second) // a reload that rotated alice's key
	if _, ok := keys.Lookup("sk-alice"); ok || !svc.KeyAllows(ctx, keys, "sk-alice2", "sb-a") {
		t.Error("the reloaded ring is not the one answering")
	}
}
