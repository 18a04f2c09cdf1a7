package bayapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

type snapshotJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	SizeBytes  int64  `json:"size_bytes"`
	CopyMethod string `json:"copy_method"`
}

func status(err error) int {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// TestPauseSnapshotForkAgainstGateway drives pause, resume, snapshots and fork through a real gateway: a paused
// sandbox stays paused across `caddy reload` and a kill -9 plus restart, and an exec resumes it inside the call
// with its Python kernel intact; a snapshot is owner-scoped (another owner gets 404 for it, in every route), the
// owner's quota answers a typed 429, a create from it and a fork carry the files over byte for byte, and deleting it
// frees it.
func TestPauseSnapshotForkAgainstGateway(t *testing.T) {
	g := startGateway(t, "", nil, true, func(s string) string {
		s = strings.Replace(s, "on_exit destroy", "on_exit keep", 1)
		return strings.Replace(s, "start_timeout 60s", "start_timeout 60s\n\t\tsnapshots {\n\t\t\tquota 1m\n\t\t}", 1)
	})
	creds := readCredentials(t, g.dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(g.url, creds.APIKey)
	bob := client.New(g.url, "sk-bob")
	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	if _, err := c.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Python(ctx, sb.ID, "answer = 42", 30); err != nil || !r.Success {
		t.Fatalf("python: %+v %v", r, err)
	}
	res, err := c.Shell(ctx, sb.ID, "head -c 700000 /dev/urandom > blob && sha256sum blob", 30)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("writing the blob: %+v %v", res, err)
	}
	sum := res.Output
	S := "/v1/sandboxes/" + sb.ID

	// Pause: another owner cannot, the owner can; it stays paused across a reload and a kill -9 + restart.
	if err := bob.Do(ctx, "POST", S+"/pause", nil, nil); status(err) != 404 {
		t.Fatalf("another owner's pause: %v", err)
	}
	var got client.Sandbox
	if err := c.Do(ctx, "POST", S+"/pause", nil, &got); err != nil || got.Status != "paused" {
		t.Fatalf("pause: %+v %v", got, err)
	}
	paused := func(when string) {
		t.Helper()
		if s, err := c.GetSandbox(ctx, sb.ID); err != nil || s.Status != "paused" {
			t.Fatalf("%s: %+v %v", when, s, err)
		}
		if !testenv.Frozen(t, g.ns+"-"+sb.ID) {
			t.Fatalf("%s: the container is not frozen", when)
		}
	}
	paused("after pause")
	if err := g.Reload(strings.Replace(g.caddyfile, "max_upload 1m", "max_upload 2m", 1)); err != nil {
		t.Fatalf("reload: %v", err)
	}
	paused("after reload")
	g.Kill()
	g.Restart(g.caddyfile)
	paused("after kill -9 and restart")

	// An exec resumes it inside the call; the kernel kept its variable through all of it.
	r, err := c.Python(ctx, sb.ID, "answer", 30)
	if err != nil || !strings.Contains(r.Output, "42") {
		t.Fatalf("python on the paused sandbox: %+v %v", r, err)
	}
	if s, _ := c.GetSandbox(ctx, sb.ID); s.Status != "ready" {
		t.Fatalf("after the resuming exec: %+v", s)
	}
	if err := c.Do(ctx, "POST", S+"/pause", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "POST", S+"/resume", nil, &got); err != nil || got.Status != "ready" {
		t.Fatalf("resume: %+v %v", got, err)
	}

	// Snapshots: owner-scoped, quota-bound, deletable.
	var snap snapshotJSON
	if err := c.Do(ctx, "POST", S+"/snapshots", map[string]any{"name": "blob"}, &snap); err != nil || snap.SizeBytes < 700000 || snap.Name != "blob" {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	if err := bob.Do(ctx, "GET", "/v1/snapshots/"+snap.ID, nil, nil); status(err) != 404 {
		t.Fatalf("another owner's snapshot: %v", err)
	}
	if err := bob.Do(ctx, "DELETE", "/v1/snapshots/"+snap.ID, nil, nil); status(err) != 404 {
		t.Fatalf("another owner's delete: %v", err)
	}
	if err := bob.Do(ctx, "POST", "/v1/sandboxes", map[string]any{"snapshot_id": snap.ID}, nil); status(err) != 404 {
		t.Fatalf("another owner's create from the snapshot: %v", err)
	}
	var bobList struct{ Items []snapshotJSON }
	if err := bob.Do(ctx, "GET", "/v1/snapshots", nil, &bobList); err != nil || len(bobList.Items) != 0 {
		t.Fatalf("another owner's list: %+v %v", bobList, err)
	}
	err = c.Do(ctx, "POST", S+"/snapshots", nil, nil)
	if status(err) != 429 || code(err) != "quota_exceeded" {
		t.Fatalf("snapshot over the 1m quota: %v", err)
	}

	var restored client.Sandbox
	if err := c.Do(ctx, "POST", "/v1/sandboxes", map[string]any{"snapshot_id": snap.ID, "ttl": 600}, &restored); err != nil {
		t.Fatalf("create from snapshot: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), restored.ID) })
	if restored.Profile != "python-default" {
		t.Errorf("restored profile: %+v", restored)
	}
	if out, err := c.Shell(ctx, restored.ID, "sha256sum blob", 60); err != nil || out.Output != sum {
		t.Fatalf("restored blob: %+v %v, want %q", out, err, sum)
	}

	var fork struct {
		Sandbox client.Sandbox `json:"sandbox"`
		Copy    struct {
			Method string `json:"method"`
			Bytes  int64  `json:"bytes"`
		} `json:"copy"`
	}
	if err := c.Do(ctx, "POST", S+"/fork", nil, &fork); err != nil || fork.Copy.Bytes < 700000 || fork.Copy.Method == "" {
		t.Fatalf("fork: %+v %v", fork, err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), fork.Sandbox.ID) })
	if out, err := c.Shell(ctx, fork.Sandbox.ID, "sha256sum blob && echo mine > forked", 60); err != nil || !strings.HasPrefix(out.Output, strings.TrimSpace(sum)) {
		t.Fatalf("forked blob: %+v %v", out, err)
	}
	if out, _ := c.Shell(ctx, sb.ID, "ls", 30); strings.Contains(out.Output, "forked") {
		t.Fatalf("the fork's write reached the source: %q", out.Output)
	}

	if err := c.Do(ctx, "DELETE", "/v1/snapshots/"+snap.ID, nil, nil); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
	if err := c.Do(ctx, "GET", "/v1/snapshots/"+snap.ID, nil, nil); status(err) != 404 {
		t.Fatalf("deleted snapshot: %v", err)
	}
	if err := c.Do(ctx, "POST", S+"/snapshots", nil, &snap); err != nil {
		t.Fatalf("snapshot once the quota was freed: %v", err)
	}
}

// TestIdlePauseAgainstGateway: with idle_action pause, a sandbox left idle is paused (not stopped) by the
// gateway, and the next request resumes it inside the call with its kernel's variables.
func TestIdlePauseAgainstGateway(t *testing.T) {
	g := startGateway(t, "", nil, true, func(s string) string {
		return strings.Replace(s, "idle_timeout 30m", "idle_timeout 2s\n\t\t\tidle_action pause\n\t\t\tpause_timeout 10m", 1)
	})
	creds := readCredentials(t, g.dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := client.New(g.url, creds.APIKey)
	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Python(ctx, sb.ID, "napped = 'yes'", 30); err != nil || !r.Success {
		t.Fatalf("python: %+v %v", r, err)
	}
	for {
		s, err := c.GetSandbox(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == "paused" {
			if s.IdleExpiresAt == nil {
				t.Errorf("an idle-paused sandbox shows no second deadline: %+v", s)
			}
			break
		}
		if s.Status != "ready" {
			t.Fatalf("idle sandbox went %s, want paused", s.Status)
		}
		select {
		case <-ctx.Done():
			t.Fatal("never paused")
		case <-time.After(200 * time.Millisecond):
		}
	}
	r, err := c.Python(ctx, sb.ID, "napped", 30)
	if err != nil || !strings.Contains(r.Output, "yes") {
		t.Fatalf("python after the idle pause: %+v %v", r, err)
	}

	// The admin API pauses, resumes and snapshots too (the operator's own: no owner scoping).
	admin := client.New("http://"+g.AdminAddr, "")
	var st struct {
		Status string `json:"status"`
	}
	if err := admin.Do(ctx, "POST", "/sandboxes/"+sb.ID+"/pause", nil, &st); err != nil || st.Status != "paused" {
		t.Fatalf("admin pause: %+v %v", st, err)
	}
	if err := admin.Do(ctx, "POST", "/sandboxes/"+sb.ID+"/resume", nil, &st); err != nil || st.Status != "ready" {
		t.Fatalf("admin resume: %+v %v", st, err)
	}
	var snap struct {
		ID string `json:"id"`
	}
	if err := admin.Do(ctx, "POST", "/sandboxes/"+sb.ID+"/snapshots", map[string]any{"name": "ops"}, &snap); err != nil || snap.ID == "" {
		t.Fatalf("admin snapshot: %+v %v", snap, err)
	}
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := admin.Do(ctx, "GET", "/sandbox-snapshots", nil, &list); err != nil || len(list.Items) != 1 || list.Items[0].ID != snap.ID {
		t.Fatalf("admin snapshot list: %+v %v", list, err)
	}
	if err := admin.Do(ctx, "DELETE", "/sandbox-snapshots/"+snap.ID, nil, nil); err != nil {
		t.Fatalf("admin snapshot delete: %v", err)
	}
}
