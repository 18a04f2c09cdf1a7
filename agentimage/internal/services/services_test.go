package services

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []agentapi.ServiceSpec
		err   string
	}{
		{"ok", []agentapi.ServiceSpec{{Name: "web", Command: "sleep 1", Port: 8000}}, ""},
		{"bad name", []agentapi.ServiceSpec{{Name: "Web!", Command: "x"}}, "name"},
		{"twice", []agentapi.ServiceSpec{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}, "twice"},
		{"no command", []agentapi.ServiceSpec{{Name: "a"}}, "command"},
		{"bad port", []agentapi.ServiceSpec{{Name: "a", Command: "x", Port: 70000}}, "port"},
		{"bad restart", []agentapi.ServiceSpec{{Name: "a", Command: "x", Restart: "sometimes"}}, "restart"},
		{"bad env", []agentapi.ServiceSpec{{Name: "a", Command: "x", Env: map[string]string{"A=B": "c"}}}, "env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Validate(tc.specs)
			if tc.err == "" {
				if err != nil || out[0].Restart != agentapi.RestartAlways {
					t.Fatalf("%v %+v", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("want error about %q, got %v", tc.err, err)
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSupervisorPolicies(t *testing.T) {
	specs, err := Validate([]agentapi.ServiceSpec{
		{Name: "always", Command: "echo started $PORT $GREETING; exec sleep 60", Port: 8123, Env: map[string]string{"GREETING": "hi"}},
		{Name: "onfail-ok", Command: "echo fine; exit 0", Restart: agentapi.RestartOnFailure},
		{Name: "onfail-bad", Command: "echo bad; exit 3", Restart: agentapi.RestartOnFailure},
		{Name: "never", Command: "exit 5", Restart: agentapi.RestartNever},
	})
	if err != nil {
		t.Fatal(err)
	}
	sup := New(specs, t.TempDir(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	sup.Start(ctx)
	t.Cleanup(func() { cancel(); sup.Wait() })
	get := func(name string) agentapi.ServiceStatus {
		for _, s := range sup.Status() {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no service %s", name)
		return agentapi.ServiceStatus{}
	}
	waitFor(t, "always running with its log", func() bool {
		s := get("always")
		return s.State == StateRunning && len(s.LastLog) == 1 && s.LastLog[0] == "started 8123 hi"
	})
	waitFor(t, "on-failure restarting a failure", func() bool { return get("onfail-bad").Restarts >= 2 })
	waitFor(t, "never stays exited", func() bool {
		s := get("never")
		return s.State == StateExited && s.ExitCode != nil && *s.ExitCode == 5
	})
	waitFor(t, "on-failure leaves a clean exit alone", func() bool {
		s := get("onfail-ok")
		return s.State == StateExited && s.Restarts == 0
	})
	// SIGKILL: the always service comes back with a new pid.
	first := get("always")
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "always restarted after kill -9", func() bool {
		s := get("always")
		return s.State == StateRunning && s.Restarts == 1 && s.PID != first.PID && s.PID != 0
	})
	cancel()
	sup.Wait()
	if s := get("always"); s.State != StateStopped {
		t.Fatalf("after shutdown: %+v", s)
	}
}
