package service

import (
	"context"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// TestRoadRefusesAnotherOwner performs, through every operation the dialects other than Bay now take (OpenSandbox,
// the console, the admin endpoint), one tenant's reach for another's sandbox, workspace or history: each is
// answered as if it did not exist, and none reaches the Manager. These operations were each dialect's own owner
// check before.
func TestRoadRefusesAnotherOwner(t *testing.T) {
	ctx := context.Background()
	svc, b, _ := newTestService(t)
	alice := Principal{Owner: "alice"}
	calls := map[string]func() error{
		"patch another's metadata": func() error { _, err := svc.PatchMetadata(ctx, alice, b.id("sb-bob"), nil); return err },
		"another's access key":     func() error { _, err := svc.AccessKey(ctx, alice, b.id("sb-bob"), "proxy"); return err },
		"delete another's sandbox": func() error { return svc.Delete(ctx, alice, b.id("sb-bob")) },
		"hold another's sandbox":   func() error { _, err := svc.Hold(ctx, alice, b.id("sb-bob")); return err },
		"read another's workspace": func() error { _, err := svc.Workspace(ctx, alice, b.id("ws-bob")); return err },
		"delete another's workspace": func() error {
			return svc.DeleteWorkspace(ctx, alice, b.id("ws-bob"))
		},
		"read another's history": func() error { _, _, err := svc.History(ctx, alice, b.id("sb-bob"), nil, 0, 10); return err },
		"edit another's history": func() error {
			_, err := svc.UpdateHistory(ctx, alice, b.id("sb-bob"), "e1", func(*sandboxes.HistoryEntry) {})
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
	// Nothing changed: bob's sandbox is there, still stopped and unlabelled, nothing was started, all five
	// sandboxes and bob's workspace are left.
	bobs, err := b.m.Get(ctx, b.id("sb-bob"))
	all, _, lerr := b.m.List(ctx, sandboxes.ListOptions{})
	_, werr := b.m.Workspace(ctx, b.id("ws-bob"))
	if err != nil || bobs.Status != sandboxes.StatusIdle || len(bobs.Metadata) != 0 || b.running() != 0 || lerr != nil || len(all) != 5 || werr != nil {
		t.Fatalf("a refused call reached the Manager: bob's %+v (%v), %d running, %d sandboxes left (%v), bob's workspace: %v",
			bobs, err, b.running(), len(all), lerr, werr)
	}
	// The operator's view refuses a tenant.
	if _, err := svc.Stats(alice); AsError(err).Code != CodeForbidden {
		t.Errorf("a tenant read the operator's stats: %v", err)
	}
	if _, _, err := svc.AgentAccess(alice, b.id("sb-alice")); AsError(err).Code != CodeForbidden {
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
	svc, b, _ := newTestService(t)
	good, err := svc.AccessKey(context.Background(), Principal{Owner: "alice"}, b.id("sb-alice"), "proxy")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, purpose, key string
		want             bool
	}{
		{b.id("sb-alice"), "proxy", good, true},
		{b.id("sb-alice"), "proxy", "", false},
		{b.id("sb-alice"), "proxy", good + "x", false},
		{b.id("sb-alice"), "other", good, false},
		{b.id("sb-bob"), "proxy", good, false},
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
		// A Manager of its own with a warm pool, whose members' events are the warm ones.
		ctx := context.Background()
		m, _ := sandboxestest.NewManager(t, sandboxes.Config{GCInterval: time.Hour, Profiles: []sandboxes.Profile{
			{ID: DefaultProfile, Image: "img"}, {ID: "pooled", Image: "img", WarmPoolSize: 1}}})
		// Bob's sandbox is ready and its ready event sent, and the pool holds its member, before the service
		// subscribes (a warm member's late event is one the filter must drop anyway).
		raw, stop := m.Subscribe(64)
		bobs, err := m.Create(ctx, sandboxes.CreateRequest{Owner: "bob", Profile: DefaultProfile})
		if err != nil {
			t.Fatal(err)
		}
		for ready := false; !ready; {
			select {
			case ev := <-raw:
				ready = ev.Type == sandboxes.EventReady && ev.SandboxID == bobs.ID
			case <-time.After(10 * time.Second):
				t.Fatal("bob's sandbox never became ready")
			}
		}
		stop()
		sandboxestest.WaitFor(t, "a warm member", func() bool { return m.WarmReady() == 1 })
		svc := New(Config{Sandboxes: m})
		out, cancel := svc.Subscribe(tc.p, 8)
		// Bob's sandbox goes, then alice claims the warm member and the pool makes another (its events are warm).
		if err := m.Delete(ctx, bobs.ID); err != nil {
			t.Fatal(err)
		}
		alices, err := m.Create(ctx, sandboxes.CreateRequest{Owner: "alice", Profile: "pooled"})
		if err != nil || alices.LaunchType != sandboxes.LaunchWarm {
			t.Fatalf("alice's create: %+v %v, want a warm claim", alices, err)
		}
		sandboxestest.WaitFor(t, "the pool's refill", func() bool { return m.WarmReady() == 1 })
		ids := map[string]string{"sb-bob": bobs.ID, "sb-alice": alices.ID}
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
			if got[i] != ids[tc.want[i]] {
				t.Fatalf("%+v saw %v, want %v", tc.p, got, tc.want)
			}
		}
	}
}
