package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCreateRejectsBadInputWithoutSideEffects(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	tests := []struct {
		req  CreateRequest
		code string
	}{
		{CreateRequest{Profile: "nope"}, CodeUnknownProfile},
		{CreateRequest{Profile: "a", Env: map[string]string{"A=B": "x"}}, CodeInvalid},
		{CreateRequest{Profile: "a", WorkspaceID: "../../etc"}, CodeInvalid},
	}
	for _, tt := range tests {
		_, err := m.Create(context.Background(), tt.req)
		if ErrorCode(err) != tt.code {
			t.Errorf("%+v: %v, want %s", tt.req, err, tt.code)
		}
	}
	var se *Error
	_, err := m.Create(context.Background(), CreateRequest{Profile: "nope"})
	if !errors.As(err, &se) || fmt.Sprint(se.Details["profiles"]) != "[a]" {
		t.Errorf("unknown profile details: %#v", err)
	}
	if c, v := d.count(); c != 0 || v != 0 {
		t.Errorf("bad requests created %d containers, %d volumes", c, v)
	}
	if items, _, _ := m.List(context.Background(), ListOptions{}); len(items) != 0 {
		t.Errorf("bad requests left %d sandboxes", len(items))
	}
}

func TestStatusIsComputedOnRead(t *testing.T) {
	p := testProfile("a")
	p.IdleTimeout = Duration(time.Hour)
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{p}})
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	if err != nil || sb.Status != StatusStarting || sb.LaunchType != LaunchCold {
		t.Fatalf("create: %+v %v", sb, err)
	}
	mustReady(t, m, sb.ID)
	got, _ := m.Get(ctx, sb.ID)
	if got.Status != StatusReady || got.IdleExpiresAt == nil {
		t.Fatalf("after ready: %+v", got)
	}
	if err := m.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ = m.Get(ctx, sb.ID); got.Status != StatusIdle || got.IdleExpiresAt != nil {
		t.Fatalf("after stop: %+v", got)
	}
	expireNow(t, m, sb.ID)
	if got, _ = m.Get(ctx, sb.ID); got.Status != StatusExpired {
		t.Fatalf("after ttl: %+v", got)
	}
	if m.Exists(sb.ID) {
		t.Error("an expired sandbox exists")
	}

	d.mu.Lock()
	d.failCreate = true
	d.mu.Unlock()
	failed, _ := m.Create(ctx, CreateRequest{Profile: "a"})
	_, err = m.EnsureRunning(ctx, failed.ID)
	if err == nil {
		t.Fatal("a sandbox whose container cannot be created became ready")
	}
	if got, _ = m.Get(ctx, failed.ID); got.Status != StatusFailed || !strings.Contains(got.LastError, "no such image") {
		t.Fatalf("failed create: %+v", got)
	}
}
