package sandboxes

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func errCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestWorkspaces: a workspace's volume exists when CreateWorkspace answers; it is listed per owner; a delete
// refuses while a live sandbox mounts it (naming that sandbox), and removes volume and record once none does.
func TestWorkspaces(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	w, err := m.CreateWorkspace(ctx, WorkspaceSpec{Owner: "alice", SizeLimitMB: 256, Backend: "docker_volume"})
	if err != nil {
		t.Fatal(err)
	}
	if !workspacePattern.MatchString(w.ID) || w.Owner != "alice" || w.Managed || w.SizeLimitMB != 256 || w.CreatedAt.IsZero() {
		t.Fatalf("workspace %+v", w)
	}
	d.mu.Lock()
	vol, ok := d.volumes[m.VolumeName(w.ID)]
	d.mu.Unlock()
	if !ok || vol.Labels["unit.managed_workspace"] != "false" {
		t.Fatalf("volume at once, never swept as an orphan: %v %+v", ok, vol)
	}
	if _, err := m.CreateWorkspace(ctx, WorkspaceSpec{Owner: "bob"}); err != nil {
		t.Fatal(err)
	}
	if mine, err := m.Workspaces(ctx, "alice"); err != nil || len(mine) != 1 || mine[0].ID != w.ID {
		t.Errorf("alice's workspaces: %+v %v", mine, err)
	}
	if all, err := m.Workspaces(ctx, ""); err != nil || len(all) != 2 {
		t.Errorf("every workspace: %+v %v", all, err)
	}
	if got, err := m.Workspace(ctx, w.ID); err != nil || got.ID != w.ID {
		t.Errorf("get: %+v %v", got, err)
	}
	if _, err := m.Workspace(ctx, "ws-000000000000"); errCode(err) != CodeNotFound {
		t.Errorf("missing workspace: %v", err)
	}

	sb, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: "alice", WorkspaceID: w.ID, WorkspaceMustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	err = m.DeleteWorkspace(ctx, w.ID)
	var we *Error
	if !errors.As(err, &we) || we.Code != CodeWorkspaceInUse || !slices.Equal(we.Details["active_sandbox_ids"].([]string), []string{sb.ID}) {
		t.Fatalf("delete in use: %v", err)
	}
	if err := m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	_, ok = d.volumes[m.VolumeName(w.ID)]
	d.mu.Unlock()
	if !ok {
		t.Fatal("deleting the sandbox removed the workspace it mounted")
	}
	if err := m.DeleteWorkspace(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	_, ok = d.volumes[m.VolumeName(w.ID)]
	d.mu.Unlock()
	if ok {
		t.Error("the deleted workspace's volume is still there")
	}
	if _, err := m.Workspace(ctx, w.ID); errCode(err) != CodeNotFound {
		t.Errorf("deleted workspace still recorded: %v", err)
	}
	if err := m.DeleteWorkspace(ctx, w.ID); errCode(err) != CodeNotFound {
		t.Errorf("second delete: %v", err)
	}
	// A create that looked the workspace up before it was deleted does not mount it.
	if _, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: "alice", WorkspaceID: w.ID, WorkspaceMustExist: true}); errCode(err) != CodeNotFound {
		t.Errorf("create on a deleted workspace: %v", err)
	}
}

// slowRemove holds RemoveVolume until released, so a test can act while a workspace delete is under way.
type slowRemove struct {
	*fakeDriver
	removing chan struct{}
	release  chan struct{}
}

func (d *slowRemove) RemoveVolume(ctx context.Context, name string) error {
	d.removing <- struct{}{}
	<-d.release
	return d.fakeDriver.RemoveVolume(ctx, name)
}

// TestWorkspaceCreateDuringDelete: a create arriving while the delete removes the volume finds no workspace (it
// would otherwise mount a volume being removed, or make a new empty one under a deleted cargo's name).
func TestWorkspaceCreateDuringDelete(t *testing.T) {
	fd := newFakeDriver(t)
	d := &slowRemove{fakeDriver: fd, removing: make(chan struct{}), release: make(chan struct{})}
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Apply(ctx, Config{Profiles: []Profile{testProfile("a")}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	w, err := m.CreateWorkspace(ctx, WorkspaceSpec{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- m.DeleteWorkspace(ctx, w.ID) }()
	<-d.removing
	_, cerr := m.Create(ctx, CreateRequest{Profile: "a", Owner: "alice", WorkspaceID: w.ID})
	derr := m.DeleteWorkspace(ctx, w.ID)
	close(d.release)
	if err := <-deleted; err != nil {
		t.Fatalf("delete: %v", err)
	}
	if errCode(cerr) != CodeNotFound {
		t.Errorf("create during the delete: %v", cerr)
	}
	if errCode(derr) != CodeNotFound {
		t.Errorf("a second delete during the first: %v", derr)
	}
}

// TestWorkspaceDeleteCreateRace performs the race: a create that mounts a workspace and a delete of it, started
// together, many times. Exactly one wins each time: the sandbox exists on a recorded workspace and the delete was
// refused as in use, or the workspace is gone and the create was refused as not found.
func TestWorkspaceDeleteCreateRace(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	var createWins, deleteWins int
	for i := range 200 {
		w, err := m.CreateWorkspace(ctx, WorkspaceSpec{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var sb *Sandbox
		var cerr, derr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			sb, cerr = m.Create(ctx, CreateRequest{Profile: "a", Owner: "alice", WorkspaceID: w.ID, WorkspaceMustExist: true})
		}()
		go func() {
			defer wg.Done()
			<-start
			derr = m.DeleteWorkspace(ctx, w.ID)
		}()
		close(start)
		wg.Wait()
		rec, _ := m.Workspace(ctx, w.ID)
		d.mu.Lock()
		_, vol := d.volumes[m.VolumeName(w.ID)]
		d.mu.Unlock()
		switch {
		case cerr == nil && derr != nil:
			createWins++
			if errCode(derr) != CodeWorkspaceInUse || rec == nil || sb.WorkspaceID != w.ID {
				t.Fatalf("round %d: create won but delete said %v, record %v", i, derr, rec)
			}
			if err := m.Delete(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
			if err := m.DeleteWorkspace(ctx, w.ID); err != nil {
				t.Fatal(err)
			}
		case derr == nil && cerr != nil:
			deleteWins++
			if errCode(cerr) != CodeNotFound || rec != nil || vol {
				t.Fatalf("round %d: delete won but create said %v, record %v, volume %v", i, cerr, rec, vol)
			}
		default:
			t.Fatalf("round %d: create %v and delete %v: both or neither won", i, cerr, derr)
		}
	}
	t.Logf("create won %d times, delete %d times", createWins, deleteWins)
	if list, _, err := m.List(ctx, ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("sandboxes left behind: %d %v", len(list), err)
	}
}

// TestManagedWorkspaceRecord: a create that asks for it (CreateRequest.RecordWorkspace) has its own workspace listed
// as a managed workspace of its owner, by a cold create and by a warm claim alike, and never a caller's workspace it
// mounts; the record is dropped however the sandbox goes (a delete, its TTL), and another sandbox's record stays.
func TestManagedWorkspaceRecord(t *testing.T) {
	warm := testProfile("w")
	warm.WarmPoolSize = 1
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a"), warm}, GCInterval: time.Hour})
	ctx := context.Background()
	ws := m.store.(WorkspaceStore)
	spec := &WorkspaceSpec{Owner: "ignored", Backend: "docker_volume", SizeLimitMB: 1024}
	waitFor(t, func() bool { return poolOf(t, m, "w").Ready == 1 })
	caller, err := m.CreateWorkspace(ctx, WorkspaceSpec{Owner: "alice", Backend: "docker_volume", SizeLimitMB: 5})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		req    CreateRequest
		listed bool
		launch string
	}{
		{"cold create", CreateRequest{Profile: "a", Owner: "alice", TTL: time.Hour, RecordWorkspace: spec}, true, LaunchCold},
		{"warm claim", CreateRequest{Profile: "w", Owner: "alice", TTL: time.Hour, RecordWorkspace: spec}, true, LaunchWarm},
		{"not asked", CreateRequest{Profile: "a", Owner: "alice", TTL: time.Hour}, false, LaunchCold},
		{"on a caller's workspace", CreateRequest{Profile: "a", Owner: "alice", TTL: time.Hour, WorkspaceID: caller.ID,
			WorkspaceMustExist: true, RecordWorkspace: spec}, false, LaunchCold},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := m.Create(ctx, tc.req)
			if err != nil || sb.LaunchType != tc.launch {
				t.Fatalf("create: %+v %v, want launch %s", sb, err, tc.launch)
			}
			mustReady(t, m, sb.ID)
			w, err := ws.Cargo(sb.WorkspaceID)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.listed && (w == nil || !w.Managed || w.ManagedBySandboxID == nil || *w.ManagedBySandboxID != sb.ID ||
				w.Owner != "alice" || w.Backend != "docker_volume" || w.SizeLimitMB != 1024 || w.CreatedAt.IsZero()):
				t.Fatalf("the record of %s's workspace: %+v", sb.ID, w)
			case !tc.listed && w != nil && w.Managed:
				t.Fatalf("%s's workspace was listed as managed: %+v", sb.ID, w)
			}
			if err := m.Delete(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
			w, err = ws.Cargo(sb.WorkspaceID)
			switch {
			case err != nil:
				t.Fatal(err)
			case sb.WorkspaceID == caller.ID && (w == nil || w.Managed):
				t.Fatalf("the caller's workspace record went with the sandbox: %+v", w)
			case sb.WorkspaceID != caller.ID && w != nil:
				t.Fatalf("the deleted sandbox's workspace record is still there: %+v", w)
			}
		})
	}
}

// TestManagedWorkspaceRecordGoesWithItsSandbox: the record an API keeps of a sandbox's own workspace (Bay's managed
// cargo) is dropped however the sandbox goes, here by its TTL, and a caller's workspace record is left alone.
func TestManagedWorkspaceRecordGoesWithItsSandbox(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}, GCInterval: time.Hour})
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: "alice", TTL: time.Hour, RecordWorkspace: &WorkspaceSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	ws := m.store.(WorkspaceStore)
	if w, err := ws.Cargo(sb.WorkspaceID); err != nil || w == nil {
		t.Fatalf("the Manager did not list the workspace it made: %v", err)
	}
	other := "sandbox-other"
	if err := ws.PutCargo(&Workspace{ID: "ws-0123456789ab", Owner: "alice", Managed: true, ManagedBySandboxID: &other}); err != nil {
		t.Fatal(err)
	}
	expireNow(t, m, sb.ID)
	if rep := m.CollectGarbage(ctx); rep.Expired != 1 {
		t.Fatalf("gc: %+v", rep)
	}
	if w, err := ws.Cargo(sb.WorkspaceID); err != nil || w != nil {
		t.Errorf("the expired sandbox's workspace record is still there: %+v %v", w, err)
	}
	if w, err := ws.Cargo("ws-0123456789ab"); err != nil || w == nil {
		t.Errorf("another sandbox's workspace record went too: %v", err)
	}
}
