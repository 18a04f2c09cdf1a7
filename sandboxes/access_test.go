package sandboxes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestExtendTTL(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	got, err := m.ExtendTTL(ctx, sb.ID, time.Hour)
	if err != nil || got.ExpiresAt.Sub(*sb.ExpiresAt) != time.Hour {
		t.Fatalf("extend: %+v %v", got, err)
	}
	if _, err := m.ExtendTTL(ctx, sb.ID, 0); ErrorCode(err) != CodeInvalid {
		t.Errorf("extend by 0: %v", err)
	}
	forever, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: -1})
	if _, err := m.ExtendTTL(ctx, forever.ID, time.Hour); ErrorCode(err) != CodeTTLInfinite {
		t.Errorf("extend infinite: %v", err)
	}
	if _, err := m.ExtendTTL(ctx, "sandbox-000000000000", time.Hour); ErrorCode(err) != CodeNotFound {
		t.Errorf("extend missing: %v", err)
	}
}

func TestLeaseKeepsAnExpiredSandboxFromTheCollector(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}, GCInterval: time.Hour})
	ctx := context.Background()
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	mustReady(t, m, sb.ID)
	release, err := m.Acquire(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	expireNow(t, m, sb.ID)
	if rep := m.CollectGarbage(ctx); rep.Expired != 0 {
		t.Fatalf("collected a leased sandbox: %+v", rep)
	}
	release()
	release() // a second release does nothing
	if rep := m.CollectGarbage(ctx); rep.Expired != 1 {
		t.Fatalf("gc after release: %+v", rep)
	}
	if c, v := d.count(); c != 0 || v != 0 {
		t.Errorf("expiry left %d containers, %d volumes", c, v)
	}
	if _, err := m.Acquire(sb.ID); ErrorCode(err) != CodeNotFound {
		t.Errorf("acquire a removed sandbox: %v", err)
	}
}

func TestEnsureRunningWaitIsBounded(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}, StartTimeout: 100 * time.Millisecond})
	d.startDelay = time.Second
	sb, _ := m.Create(context.Background(), CreateRequest{Profile: "a"})
	start := time.Now()
	_, err := m.EnsureRunning(context.Background(), sb.ID)
	if ErrorCode(err) != CodeTimeout || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("ensure running a slow start: %v after %s", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m.EnsureRunning(ctx, sb.ID); ErrorCode(err) != CodeTimeout {
		t.Fatalf("ensure running with a short context: %v", err)
	}
}

// TestRelaunchAfterStartupFailure: a call right after a sandbox turns failed starts it again and meets the agent's
// start-up failure, never the name of the failed container that is still being removed.
func TestRelaunchAfterStartupFailure(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	d.mu.Lock()
	d.startupFailure = "pip: No matching distribution found for nope"
	d.removeDelay = 200 * time.Millisecond
	d.mu.Unlock()
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := m.Get(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == StatusFailed {
				if !strings.HasPrefix(got.LastError, CodeStartupFailed+": ") || !strings.Contains(got.LastError, "No matching distribution") {
					t.Fatalf("last error %q", got.LastError)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("status %s, want failed", got.Status)
			}
			if i == 0 {
				// The first launch starts by itself; later ones only when called.
				time.Sleep(5 * time.Millisecond)
				continue
			}
			t.Fatalf("status %s after a failed relaunch, want failed", got.Status)
		}
		_, err := m.EnsureRunning(ctx, sb.ID)
		var se *Error
		if !errors.As(err, &se) || se.Code != CodeStartupFailed || !strings.Contains(se.Message, "No matching distribution") ||
			se.Details["last_error"] != strings.TrimPrefix(se.Message, "sandbox "+sb.ID+" could not be started: ") {
			t.Fatalf("relaunch %d of a failed sandbox: %v (%+v)", i+1, err, se)
		}
	}
}

func TestLaunchFailureKeepsTheLaunchsCode(t *testing.T) {
	full := &Error{Code: CodeQuotaExceeded, Message: "network n is full", Details: map[string]any{"scope": "network", "limit": 1023}}
	for _, tc := range []struct {
		name    string
		msg     string
		typed   *Error
		code    string
		details map[string]any
	}{
		{"typed, with details", "starting container: " + full.Error(), full, CodeQuotaExceeded, map[string]any{"scope": "network", "limit": 1023}},
		{"typed engine error", "starting container: engine_error: x", &Error{Code: CodeEngine, Message: "x"}, CodeEngine, nil},
		{"text only: timeout", "timeout: the agent did not answer /health within 1m0s", nil, CodeTimeout, nil},
		{"text only: start-up", "startup_failed: init command failed", nil, CodeStartupFailed, nil},
		{"text only: anything else", "starting container: quota_exceeded: network n is full", nil, CodeEngine, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := launchFailure("sb-1", tc.msg, tc.typed)
			if err.Code != tc.code || err.Details["last_error"] != tc.msg || !strings.Contains(err.Message, tc.msg) {
				t.Fatalf("launchFailure = %+v, want code %s with the text", err, tc.code)
			}
			for k, v := range tc.details {
				if err.Details[k] != v {
					t.Errorf("details[%s] = %v, want %v", k, err.Details[k], v)
				}
			}
		})
	}
}
