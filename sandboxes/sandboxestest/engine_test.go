package sandboxestest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// TestManagerOverEngine: the real Manager runs its whole lifecycle over the in-memory Engine: a create is held
// (started, its agent found healthy), stopped (the container kept, not running), held again, and deleted (the
// container gone, the sandbox not_found).
func TestManagerOverEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, engine := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img"}}})
	sb, err := m.Create(ctx, sandboxes.CreateRequest{Owner: "alice", Profile: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Owner != "alice" || sb.Profile != "base" {
		t.Fatalf("created %+v", sb)
	}
	for range 2 {
		tg, err := m.Hold(ctx, sb.ID)
		if err != nil {
			t.Fatalf("hold: %v", err)
		}
		if tg.SandboxID != sb.ID || tg.Addr == "" {
			t.Fatalf("hold answered %+v", tg)
		}
		if got, err := m.Get(ctx, sb.ID); err != nil || got.Status != sandboxes.StatusReady {
			t.Fatalf("after hold: %+v, %v", got, err)
		}
		if err := m.Stop(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := m.Get(ctx, sb.ID); err != nil || got.Status != sandboxes.StatusIdle {
			t.Fatalf("after stop: %+v, %v", got, err)
		}
	}
	if engine.Containers() != 1 {
		t.Fatalf("the engine holds %d containers, want the stopped one", engine.Containers())
	}
	if err := m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	var se *sandboxes.Error
	if _, err := m.Get(ctx, sb.ID); !errors.As(err, &se) || se.Code != sandboxes.CodeNotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if engine.Containers() != 0 {
		t.Fatalf("the engine still holds %d containers after the delete", engine.Containers())
	}
}
