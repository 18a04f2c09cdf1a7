package docker_test

import (
	"context"
	"log/slog"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// launchSteps keeps the step names of every launch the Manager logs (sandboxes.LaunchStepsMessage).
type launchSteps struct {
	mu       sync.Mutex
	launches [][]string
}

func (s *launchSteps) Enabled(context.Context, slog.Level) bool { return true }
func (s *launchSteps) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *launchSteps) WithGroup(string) slog.Handler            { return s }
func (s *launchSteps) Handle(_ context.Context, r slog.Record) error {
	if r.Message != sandboxes.LaunchStepsMessage {
		return nil
	}
	var names []string
	r.Attrs(func(a slog.Attr) bool {
		if n, ok := strings.CutSuffix(a.Key, "_ms"); ok {
			names = append(names, n)
		}
		return true
	})
	s.mu.Lock()
	s.launches = append(s.launches, names)
	s.mu.Unlock()
	return nil
}

// On the real engine a sandbox is ready once its agent answers the readiness request, and the first call after
// that (a cold create's, and a warm claim's) goes over the probe's connection: no new dial. Every launch logs its
// steps, the readiness wait (health) last.
func TestReadinessOnTheEngine(t *testing.T) {
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgr")
	testenv.RemoveNamespace(t, ns)
	drv, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	steps := &launchSteps{}
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: ns}, drv,
		sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "store.db")), slog.New(steps))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cold, warm := smallProfile("cold", image), smallProfile("warm", image)
	warm.WarmPoolSize = 1
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{cold, warm}, GCInterval: time.Hour, StartTimeout: 4 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()

	firstCall := func(profile string) {
		t.Helper()
		sb, err := mgr.Create(ctx, sandboxes.CreateRequest{Profile: profile})
		if err != nil {
			t.Fatal(err)
		}
		target, err := mgr.EnsureRunning(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		var reused, got bool
		tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if !got {
				got, reused = true, i.Reused
			}
		}})
		res, err := agentapi.NewClientFor(target.Addr, target.Token, mgr.AgentHTTPClient()).Exec(tctx, agentapi.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("%s: first exec: %v %+v", profile, err, res)
		}
		if !reused {
			t.Errorf("%s (%s): the first exec dialled a new connection instead of the readiness probe's", profile, sb.LaunchType)
		}
		_ = mgr.Delete(ctx, sb.ID)
	}
	firstCall("cold")
	deadline := time.Now().Add(4 * time.Minute)
	for mgr.WarmReady() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool never filled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	firstCall("warm")

	steps.mu.Lock()
	defer steps.mu.Unlock()
	if len(steps.launches) < 2 {
		t.Fatalf("launch steps logged for %d launches, want at least 2", len(steps.launches))
	}
	for _, l := range steps.launches[:2] {
		if want := []string{"volume", "create", "store", "start", "health"}; !strings.HasSuffix(strings.Join(l, ","), strings.Join(want, ",")) {
			t.Errorf("launch steps %v, want them to end %v", l, want)
		}
	}
}
