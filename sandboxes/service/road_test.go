package service

import (
	"context"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestRoadRefusesAnotherOwner performs, through every operation the dialects other than Bay now take (OpenSandbox,
// the console, the admin endpoint), one tenant's reach for another's sandbox, workspace or history: each is
// answered as if it did not exist, and none reaches the Manager. These operations were each dialect's own owner
// check before.
func TestRoadRefusesAnotherOwner(t *testing.T) {
	ctx := context.Background()
	svc, sbs, _ := newTestService()
	alice := Principal{Owner: "alice"}
	calls := map[string]func() error{
		"patch another's metadata": func() error { _, err := svc.PatchMetadata(ctx, alice, "sb-bob", nil); return err },
		"another's access key":     func() error { _, err := svc.AccessKey(ctx, alice, "sb-bob", "proxy"); return err },
		"delete another's sandbox": func() error { return svc.Delete(ctx, alice, "sb-bob") },
		"hold another's sandbox":   func() error { _, err := svc.Hold(ctx, alice, "sb-bob"); return err },
		"read another's workspace": func() error { _, err := svc.Workspace(ctx, alice, "ws-bob"); return err },
		"delete another's workspace": func() error {
			return svc.DeleteWorkspace(ctx, alice, "ws-bob")
		},
		"read another's history": func() error { _, _, err := svc.History(ctx, alice, "sb-bob", nil, 0, 10); return err },
		"edit another's history": func() error {
			_, err := svc.UpdateHistory(ctx, alice, "sb-bob", "e1", func(*sandboxes.HistoryEntry) {})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); err == nil || AsError(err).Code != CodeNotFound {
				t.Fatalf("got %v, want not_found", err)
			}
		})
	}
	if len(sbs.Calls()) != 0 || sbs.Holds() != 0 || sbs.Len() != 5 || !sbs.HasWorkspace("ws-bob") {
		t.Fatalf("a refused call reached the Manager: %v, %d holds, %d sandboxes left", sbs.Calls(), sbs.Holds(), sbs.Len())
	}
	// The operator's view refuses a tenant.
	if _, err := svc.Stats(alice); AsError(err).Code != CodeForbidden {
		t.Errorf("a tenant read the operator's stats: %v", err)
	}
	if _, _, err := svc.AgentAccess(alice, "sb-alice"); AsError(err).Code != CodeForbidden {
		t.Errorf("a tenant read an agent token: %v", err)
	}
	list, _, err := svc.ListAll(ctx, alice, sandboxes.ListOptions{Owner: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list {
		if sb.Owner != "alice" {
			t.Errorf("a tenant's owner filter listed %s's sandbox %s", sb.Owner, sb.ID)
		}
	}
}

// TestAccessKeyValid: the key a caller without a principal presents (OpenSandbox's proxy URL) admits only the
// sandbox and purpose it was made for; an empty, wrong or other sandbox's key, or a missing sandbox, is refused.
func TestAccessKeyValid(t *testing.T) {
	svc, _, _ := newTestService()
	good, err := svc.AccessKey(context.Background(), Principal{Owner: "alice"}, "sb-alice", "proxy")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, purpose, key string
		want             bool
	}{
		{"sb-alice", "proxy", good, true},
		{"sb-alice", "proxy", "", false},
		{"sb-alice", "proxy", good + "x", false},
		{"sb-alice", "other", good, false},
		{"sb-bob", "proxy", good, false},
		{"sb-gone", "proxy", good, false},
	} {
		if got := svc.AccessKeyValid(tc.id, tc.purpose, tc.key); got != tc.want {
			t.Errorf("AccessKeyValid(%s, %s, %q) = %v, want %v", tc.id, tc.purpose, tc.key, got, tc.want)
		}
	}
}

// TestSubscribeSeesOwnEvents: the console's live list gets only its principal's events, never a warm-pool
// sandbox's; an admin sees every owner's.
func TestSubscribeSeesOwnEvents(t *testing.T) {
	for _, tc := range []struct {
		p    Principal
		want []string
	}{
		{Principal{Owner: "alice"}, []string{"sb-alice"}},
		{Principal{Owner: "ops", Admin: true}, []string{"sb-bob", "sb-alice"}},
	} {
		svc, sbs, _ := newTestService()
		sbs.Events = make(chan sandboxes.Event, 8)
		out, cancel := svc.Subscribe(tc.p, 8)
		sbs.Events <- sandboxes.Event{Type: sandboxes.EventCreated, SandboxID: "sb-bob", Owner: "bob"}
		sbs.Events <- sandboxes.Event{Type: sandboxes.EventCreated, SandboxID: "warm-1", Owner: "alice", Warm: true}
		sbs.Events <- sandboxes.Event{Type: sandboxes.EventReady, SandboxID: "sb-alice", Owner: "alice"}
		cancel() // closes the Manager's channel: the filtered stream ends after what it let through
		var got []string
		timeout := time.After(10 * time.Second)
		for done := false; !done; {
			select {
			case ev, ok := <-out:
				if !ok {
					done = true
					break
				}
				got = append(got, ev.SandboxID)
			case <-timeout:
				t.Fatal("the filtered stream did not end")
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%+v saw %v, want %v", tc.p, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%+v saw %v, want %v", tc.p, got, tc.want)
			}
		}
	}
}
