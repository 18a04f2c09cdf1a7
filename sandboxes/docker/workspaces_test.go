package docker_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

func lifecycleCode(err error) string {
	var e *sandboxes.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestWorkspacesOnTheEngine: a workspace's volume is on the engine when CreateWorkspace answers; a sandbox that
// mounts it keeps the delete refused (in use); the workspace survives a Manager restart (the one store); deleting
// it removes the volume. Then the create/delete race, on the real engine: exactly one of the two wins each round.
func TestWorkspacesOnTheEngine(t *testing.T) {
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}}
	h := newHarness(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	w, err := h.mgr.CreateWorkspace(ctx, sandboxes.WorkspaceSpec{Owner: "tester", SizeLimitMB: 64, Backend: "docker_volume"})
	if err != nil {
		t.Fatal(err)
	}
	vol := h.mgr.VolumeName(w.ID)
	if v, err := h.cli.VolumeInspect(ctx, vol); err != nil || v.Labels[h.ns+".managed_workspace"] != "false" {
		t.Fatalf("the volume at once, never swept: %+v %v", v.Labels, err)
	}
	sb, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester", WorkspaceID: w.ID, WorkspaceMustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	h.ready(sb.ID)
	if err := h.mgr.DeleteWorkspace(ctx, w.ID); lifecycleCode(err) != sandboxes.CodeWorkspaceInUse {
		t.Fatalf("delete while mounted: %v", err)
	}
	if err := h.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if !h.volumeExists(vol) {
		t.Fatal("deleting the sandbox removed the workspace it mounted")
	}

	// The Manager is remade on the same store: the workspace is still known.
	if err := h.mgr.Close(); err != nil {
		t.Fatal(err)
	}
	h.start(cfg)
	if list, err := h.mgr.Workspaces(ctx, "tester"); err != nil || len(list) != 1 || list[0].ID != w.ID {
		t.Fatalf("after a restart: %+v %v", list, err)
	}
	if err := h.mgr.DeleteWorkspace(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if h.volumeExists(vol) {
		t.Error("the deleted workspace's volume is still on the engine")
	}

	wins := map[string]int{}
	for round := 0; round < 6; round++ {
		w, err := h.mgr.CreateWorkspace(ctx, sandboxes.WorkspaceSpec{Owner: "tester"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var sb *sandboxes.Sandbox
		var cerr, derr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			sb, cerr = h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester", WorkspaceID: w.ID, WorkspaceMustExist: true})
		}()
		go func() {
			defer wg.Done()
			<-start
			derr = h.mgr.DeleteWorkspace(ctx, w.ID)
		}()
		close(start)
		wg.Wait()
		switch {
		case cerr == nil && lifecycleCode(derr) == sandboxes.CodeWorkspaceInUse:
			wins["create"]++
			h.ready(sb.ID) // it really mounts the workspace
			if err := h.mgr.Delete(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
			if err := h.mgr.DeleteWorkspace(ctx, w.ID); err != nil {
				t.Fatal(err)
			}
		case derr == nil && lifecycleCode(cerr) == sandboxes.CodeNotFound:
			wins["delete"]++
			if h.volumeExists(h.mgr.VolumeName(w.ID)) {
				t.Fatalf("round %d: the delete won but the volume is there", round)
			}
		default:
			t.Fatalf("round %d: create %v, delete %v: both or neither won", round, cerr, derr)
		}
	}
	t.Logf("wins: %v", wins)
	if c, v := h.counts(); c != 0 || v != 0 {
		t.Errorf("left on the engine: %d containers, %d volumes", c, v)
	}
}
