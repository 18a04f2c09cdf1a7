package docker_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// fill writes a 50 MB random file, a nested file, a symlink and an executable into the sandbox's workspace and
// returns their checksum listing.
func (h *harness) fill(id string) string {
	h.t.Helper()
	script := `set -e; cd /workspace; head -c 52428800 /dev/urandom > big; mkdir -p d/e; echo nested > d/e/f; ln -s d/e/f link
printf '#!/bin/sh\necho run\n' > tool; chmod 755 tool; sha256sum big d/e/f tool; readlink link; stat -c '%a %u' tool big`
	out, err := h.exec(id, "sh", "-c", script)
	if err != nil {
		h.t.Fatalf("filling the workspace: %s %v", out, err)
	}
	return out
}

func (h *harness) listing(id string) string {
	h.t.Helper()
	out, err := h.exec(id, "sh", "-c", "cd /workspace; sha256sum big d/e/f tool; readlink link; stat -c '%a %u' tool big")
	if err != nil {
		h.t.Fatalf("reading the workspace: %s %v", out, err)
	}
	return out
}

// TestSnapshotRestoreForkQuota: a snapshot of a running sandbox's 50 MB workspace (taken frozen, thawed after)
// creates a sandbox with byte-identical files, outlives its source and a restart of the Manager; a fork leaves the
// two sandboxes independent; the owner's byte quota refuses a snapshot with a typed quota_exceeded, and deleting a
// snapshot frees its volume and its quota.
func TestSnapshotRestoreForkQuota(t *testing.T) {
	eachRuntime(t, snapshotRestoreForkQuota)
}

func snapshotRestoreForkQuota(t *testing.T, runtime string) {
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{runtimeProfile("small", runtime)},
		Snapshots: sandboxes.SnapshotLimits{QuotaBytes: 80 << 20}}
	h := newHarness(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := h.create("small")
	h.ready(src.ID)
	want := h.fill(src.ID)

	snap, err := h.mgr.CreateSnapshot(ctx, src.ID, sandboxes.SnapshotRequest{Name: "fifty"})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.SizeBytes < 50<<20 || snap.Owner != "tester" || snap.Name != "fifty" || snap.Kind != sandboxes.SnapshotWorkspace ||
		(snap.Method != sandboxes.CopyReflink && snap.Method != sandboxes.CopyStreamed) {
		t.Fatalf("snapshot record: %+v", snap)
	}
	t.Logf("snapshot: %d bytes, %d files, method %s", snap.SizeBytes, snap.Files, snap.Method)
	if got, _ := h.mgr.Get(ctx, src.ID); got.Status != sandboxes.StatusReady || testenv.Frozen(t, h.containerName(src.ID)) {
		t.Fatalf("the source was not thawed after the capture: %+v", got)
	}
	// A second one does not fit the 80 MB quota: typed, and nothing is left behind.
	_, vols := h.counts()
	if _, err := h.mgr.CreateSnapshot(ctx, src.ID, sandboxes.SnapshotRequest{}); sandboxes.ErrorCode(err) != sandboxes.CodeQuotaExceeded {
		t.Fatalf("snapshot over quota: %v", err)
	}
	if _, v := h.counts(); v != vols {
		t.Fatalf("a refused snapshot left a volume: %d -> %d", vols, v)
	}
	if _, err := h.mgr.CreateSnapshot(ctx, src.ID, sandboxes.SnapshotRequest{Kind: "memory"}); sandboxes.ErrorCode(err) != sandboxes.CodeCapabilityAbsent {
		t.Fatalf("memory snapshot: %v", err)
	}

	// The snapshot outlives its sandbox and a restart.
	if err := h.mgr.Delete(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	h.mgr.Close()
	h.start(cfg)
	list, err := h.mgr.Snapshots(ctx, "tester")
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("snapshots after the source's deletion and a restart: %+v %v", list, err)
	}
	listed := &sandboxes.WorkspaceSpec{Backend: "docker_volume", SizeLimitMB: 1024}
	restored, stats, err := h.mgr.CreateFromSnapshot(ctx, sandboxes.CreateRequest{Owner: "tester", RecordWorkspace: listed}, snap.ID)
	if err != nil {
		t.Fatalf("create from snapshot: %v", err)
	}
	if restored.Profile != "small" || stats.Bytes != snap.SizeBytes {
		t.Fatalf("restored %+v with %+v", restored, stats)
	}
	h.ready(restored.ID)
	if got := h.listing(restored.ID); got != want {
		t.Fatalf("restored workspace differs:\n%s\nwant\n%s", got, want)
	}

	// Fork of the running restored sandbox: same bytes, then independent.
	fork, err := h.mgr.Fork(ctx, restored.ID, sandboxes.ForkRequest{RecordWorkspace: listed})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	// Both copies are listed as managed workspaces of their sandboxes (Bay's managed cargos).
	for _, sb := range []*sandboxes.Sandbox{restored, fork.Sandbox} {
		if w, err := h.mgr.Workspace(ctx, sb.WorkspaceID); err != nil || !w.Managed || w.ManagedBySandboxID == nil ||
			*w.ManagedBySandboxID != sb.ID || w.Owner != "tester" || w.SizeLimitMB != 1024 {
			t.Fatalf("the workspace record of %s: %+v %v", sb.ID, w, err)
		}
	}
	t.Logf("fork copy: %+v", fork.Copy)
	h.ready(fork.Sandbox.ID)
	if got := h.listing(fork.Sandbox.ID); got != want {
		t.Fatalf("forked workspace differs:\n%s", got)
	}
	if out, err := h.exec(fork.Sandbox.ID, "sh", "-c", "echo fork > /workspace/only-fork; echo changed > /workspace/d/e/f"); err != nil {
		t.Fatal(out, err)
	}
	if out, err := h.exec(restored.ID, "sh", "-c", "echo src > /workspace/only-src"); err != nil {
		t.Fatal(out, err)
	}
	if out, _ := h.exec(restored.ID, "sh", "-c", "ls /workspace; cat /workspace/d/e/f"); strings.Contains(out, "only-fork") || !strings.Contains(out, "nested") {
		t.Fatalf("the fork's writes reached the source: %s", out)
	}
	if out, _ := h.exec(fork.Sandbox.ID, "ls", "/workspace"); strings.Contains(out, "only-src") {
		t.Fatalf("the source's writes reached the fork: %s", out)
	}

	// Deleting the snapshot frees its storage and its quota.
	vol, err := h.cli.VolumeInspect(ctx, snap.Volume)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.mgr.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
	if _, err := h.cli.VolumeInspect(ctx, snap.Volume); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the snapshot's volume is still there: %v", err)
	}
	if _, err := os.Stat(vol.Mountpoint); !os.IsNotExist(err) {
		t.Fatalf("the snapshot's data is still on disk: %v", err)
	}
	if _, err := h.mgr.GetSnapshot(ctx, snap.ID); sandboxes.ErrorCode(err) != sandboxes.CodeSnapshotNotFound {
		t.Fatalf("deleted snapshot: %v", err)
	}
	again, err := h.mgr.CreateSnapshot(ctx, fork.Sandbox.ID, sandboxes.SnapshotRequest{})
	if err != nil {
		t.Fatalf("snapshot after the quota was freed: %v", err)
	}
	if err := h.mgr.DeleteSnapshot(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	// The fork's workspace record goes with it.
	if err := h.mgr.Delete(ctx, fork.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.Workspace(ctx, fork.Sandbox.WorkspaceID); sandboxes.ErrorCode(err) != sandboxes.CodeNotFound {
		t.Fatalf("the deleted fork's workspace record: %v", err)
	}
}

// TestSnapshotOrphanSwept: a snapshot volume no record names (a gateway died between the copy and its record) is
// removed by the collector; a recorded snapshot's volume is kept.
func TestSnapshotOrphanSwept(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}, GCInterval: time.Hour,
		OrphanMinAge: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := h.create("small")
	h.ready(sb.ID)
	snap, err := h.mgr.CreateSnapshot(ctx, sb.ID, sandboxes.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	orphan := h.ns + "-snap-0123456789ab"
	if _, err := h.cli.VolumeCreate(ctx, volume.CreateOptions{Name: orphan, Labels: map[string]string{
		h.ns + ".managed": "true", h.ns + ".instance": h.mgr.Instance(), h.ns + ".snapshot": "snap-0123456789ab"}}); err != nil {
		t.Fatal(err)
	}
	// Older than the 1 ms minimum age by the time the collector looks (Docker records creation to the second).
	h.mgr.CollectGarbage(ctx)
	if _, err := h.cli.VolumeInspect(ctx, orphan); !cerrdefs.IsNotFound(err) {
		t.Fatalf("orphan snapshot volume survived the sweep: %v", err)
	}
	if _, err := h.cli.VolumeInspect(ctx, snap.Volume); err != nil {
		t.Fatalf("the recorded snapshot's volume was swept: %v", err)
	}
	if got, _ := h.mgr.Get(ctx, sb.ID); got == nil || got.Status != sandboxes.StatusReady {
		t.Fatalf("the sandbox after the sweep: %+v", got)
	}
}
