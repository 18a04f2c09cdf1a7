package sandboxestest_test

import (
	"context"
	"errors"
	"strings"
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

// TestManagerClockDrivesTTL: ManagerConfig.Clock is the Manager's time for a sandbox's TTL too: a create's expiry,
// an extension, the status a read sees, a hold's refusal and the collector's removal all follow the clock, not the
// wall.
func TestManagerClockDrivesTTL(t *testing.T) {
	ctx := context.Background()
	clock := sandboxestest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	m, _ := sandboxestest.NewManagerAt(t, sandboxes.Config{GCInterval: time.Hour, Profiles: []sandboxes.Profile{{ID: "base", Image: "img"}}}, clock.Now)
	sb, err := m.Create(ctx, sandboxes.CreateRequest{Owner: "alice", Profile: "base", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !sb.CreatedAt.Equal(clock.Now()) || sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("created at %v expiring %v, want the clock's %v and a minute later", sb.CreatedAt, sb.ExpiresAt, clock.Now())
	}
	sandboxestest.WaitStatus(t, m, sb.ID, sandboxes.StatusReady)
	clock.Advance(50 * time.Second)
	if got, err := m.ExtendTTL(ctx, sb.ID, time.Minute); err != nil || !got.ExpiresAt.Equal(sb.ExpiresAt.Add(time.Minute)) {
		t.Fatalf("extended: %+v %v, want it to expire at %v", got, err, sb.ExpiresAt.Add(time.Minute))
	}
	clock.Advance(time.Minute) // 1m50s after the create: within the extended TTL
	if got, err := m.Get(ctx, sb.ID); err != nil || got.Status != sandboxes.StatusReady {
		t.Fatalf("within its TTL: %+v %v", got, err)
	}
	clock.Advance(20 * time.Second)
	if got, err := m.Get(ctx, sb.ID); err != nil || got.Status != sandboxes.StatusExpired {
		t.Fatalf("past its TTL on the clock: %+v %v", got, err)
	}
	var se *sandboxes.Error
	if _, err := m.Hold(ctx, sb.ID); !errors.As(err, &se) || se.Code != sandboxes.CodeExpired {
		t.Fatalf("hold past the TTL: %v", err)
	}
	if rep, err := m.RunGC(ctx); err != nil || rep.Expired != 1 {
		t.Fatalf("collection: %+v %v", rep, err)
	}
	if _, err := m.Get(ctx, sb.ID); !errors.As(err, &se) || se.Code != sandboxes.CodeNotFound {
		t.Fatalf("after the collection: %v", err)
	}
}

// TestEngineKnobs: the engine's test controls act as an engine would: blocked starts keep a create starting until
// released, the container's spec is the Manager's, pause freezes it, and a death by the OOM killer fails a
// sandbox whose profile allows no crash.
func TestEngineKnobs(t *testing.T) {
	ctx := context.Background()
	m, engine := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img", CrashLimit: -1}}})
	release := engine.BlockStarts(t)
	sb, err := m.Create(ctx, sandboxes.CreateRequest{Owner: "alice", Profile: "base", Env: map[string]string{"K": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	sandboxestest.WaitFor(t, "the container", func() bool { _, ok := engine.Spec(sb.ID); return ok })
	if got, _ := m.Get(ctx, sb.ID); got.Status != sandboxes.StatusStarting {
		t.Fatalf("while starts are blocked: %s", got.Status)
	}
	release()
	sandboxestest.WaitStatus(t, m, sb.ID, sandboxes.StatusReady)
	if spec, _ := engine.Spec(sb.ID); spec.Image != "img" {
		t.Errorf("spec %+v", spec)
	}
	if env, _ := engine.CallerEnv(sb.ID); len(env) != 1 || env["K"] != "v" {
		t.Errorf("caller env %v", env)
	}
	if _, err := m.Pause(ctx, sb.ID); err != nil || engine.Running() != 0 {
		t.Fatalf("pause: %v, %d running", err, engine.Running())
	}
	if _, err := m.Resume(ctx, sb.ID); err != nil || engine.Running() != 1 {
		t.Fatalf("resume: %v, %d running", err, engine.Running())
	}
	if !engine.Die(sb.ID, true) {
		t.Fatal("no running container to kill")
	}
	sandboxestest.WaitStatus(t, m, sb.ID, sandboxes.StatusFailed)
	var se *sandboxes.Error
	if _, err := m.Hold(ctx, sb.ID); !errors.As(err, &se) || se.Code != sandboxes.CodeContainerDied || se.Details["reason"] != "oom" {
		t.Fatalf("hold of the dead sandbox: %v", err)
	}
}

// TestEngineStartupFailure: after FailStartups the engine's agent answers as one whose start-up customisation failed,
// and the real Manager fails the start with startup_failed and the agent's message; a healthy agent starts again.
func TestEngineStartupFailure(t *testing.T) {
	ctx := context.Background()
	m, engine := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img"}}})
	engine.FailStartups("ERROR: No matching distribution found for nope==1")
	sb, err := m.Create(ctx, sandboxes.CreateRequest{Owner: "alice", Profile: "base"})
	if err != nil {
		t.Fatal(err)
	}
	sandboxestest.WaitStatus(t, m, sb.ID, sandboxes.StatusFailed)
	if got, _ := m.Get(ctx, sb.ID); !strings.HasPrefix(got.LastError, sandboxes.CodeStartupFailed+": ") ||
		!strings.Contains(got.LastError, "nope==1") {
		t.Fatalf("last error %q", got.LastError)
	}
	if _, err := m.Hold(ctx, sb.ID); sandboxes.ErrorCode(err) != sandboxes.CodeStartupFailed || !strings.Contains(err.Error(), "nope==1") {
		t.Fatalf("hold of a sandbox whose start-up fails: %v", err)
	}
	engine.FailStartups("")
	if _, err := m.Hold(ctx, sb.ID); err != nil {
		t.Fatalf("hold once the agent is healthy: %v", err)
	}
	sandboxestest.WaitStatus(t, m, sb.ID, sandboxes.StatusReady)
}
