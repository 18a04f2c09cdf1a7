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
	m, _ := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img"}}})
	sb, err := m.Create(ctx, sandboxes.CreateRequest{Owner: "alice", Profile: "base"})
	if err != nil {
		t.Fatal(err)
	}
	svc := New(Config{Sandboxes: m})
	keys := new(LiveKeys)
	if svc.KeyAllows(ctx, keys, "sk-alice", sb.ID) {
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
		{"sk-alice", sb.ID, true}, {"sk-ops", sb.ID, true}, {"sk-bob", sb.ID, false},
		{"sk-alice", "sb-missing", false}, {"sk-nobody", sb.ID, false},
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
	if _, ok := keys.Lookup("sk-alice"); ok || !svc.KeyAllows(ctx, keys, "sk-alice2", sb.ID) {
		t.Error("the reloaded ring is not the one answering")
	}
}
