package docker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// exchangeSwapper is the tenant's code: it makes a directory d and a symlink l to the host directory HOSTDIR, a
// file r and a symlink s to HOSTDIR/canary, and exchanges each pair with renameat2(RENAME_EXCHANGE) in a loop of
// its own that outlives the exec. After its first thousand rounds it leaves /workspace/swapping.
const exchangeSwapper = `
import os, subprocess, sys
w = '/workspace'
host = os.environ['HOSTDIR']
os.mkdir(w + '/d')
for n in ['planted', 'canary', 'more']:
    open(w + '/d/' + n, 'w').write('tenant ' + n + '\n')
os.symlink(host, w + '/l')
open(w + '/r', 'w').write('tenant file\n')
os.symlink(host + '/canary', w + '/s')
loop = '''
import ctypes, os, platform
nr = {'x86_64': 316, 'aarch64': 276}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
w = b'/workspace/'
pairs = [(w + b'd', w + b'l'), (w + b'r', w + b's')]
at = ctypes.c_long(-100)
n = 0
while True:
    for a, b in pairs:
        if libc.syscall(ctypes.c_long(nr), at, a, at, b, ctypes.c_long(2)) != 0:
            raise OSError(ctypes.get_errno(), 'renameat2')
    n += 1
    if n == 1000:
        open(w + b'swapping', 'w').write('yes')
'''
subprocess.Popen([sys.executable, '-c', loop], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
print('ok')
`

// TestSnapshotForkSwapAttack: a tenant exchanges a directory with a symlink to a host directory, and a file with
// a symlink to a host file, as fast as renameat2(RENAME_EXCHANGE) goes, while its workspace is copied 200 times on
// the real engine with its container running and not frozen (what a snapshot queued behind a launch that a stop
// cancelled did: the record said Stopped, so nothing was frozen), then snapshotted and forked through the Manager.
// No copy ever holds the host's canary, nothing is created in the host directory, and every copy either completes
// or fails cleanly. On the copy that walked by path, the canary reached a copy within the first 200 rounds.
func TestSnapshotForkSwapAttack(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hostDir := t.TempDir()
	if err := os.Chmod(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	canary := []byte("host canary " + hex.EncodeToString(nonce) + "\n")
	if err := os.WriteFile(filepath.Join(hostDir, "canary"), canary, 0o644); err != nil {
		t.Fatal(err)
	}
	hostUntouched := func(when string) {
		t.Helper()
		entries, err := os.ReadDir(hostDir)
		if err != nil || len(entries) != 1 || entries[0].Name() != "canary" {
			t.Fatalf("%s: the host directory changed: %v %v", when, entries, err)
		}
		if b, err := os.ReadFile(filepath.Join(hostDir, "canary")); err != nil || !bytes.Equal(b, canary) {
			t.Fatalf("%s: the host's canary changed: %q %v", when, b, err)
		}
	}
	// noCanary fails if any regular file under a volume's mountpoint holds the canary.
	noCanary := func(when, mountpoint string) {
		t.Helper()
		err := filepath.WalkDir(mountpoint, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, canary) {
					t.Fatalf("%s: the host's canary was copied to %s", when, path)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: walking %s: %v", when, mountpoint, err)
		}
	}
	mountOf := func(volume string) string {
		t.Helper()
		v, err := h.cli.VolumeInspect(ctx, volume)
		if err != nil {
			t.Fatal(err)
		}
		return v.Mountpoint
	}

	src := h.create("small")
	h.ready(src.ID)
	out, err := h.exec(src.ID, "env", "HOSTDIR="+hostDir, "python3", "-c", exchangeSwapper)
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("starting the swapper: %s %v", out, err)
	}
	for deadline := time.Now().Add(testenv.WaitLimit); ; {
		if _, err := h.exec(src.ID, "test", "-e", "/workspace/swapping"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the swapper never got going")
		}
	}
	got, err := h.mgr.Get(ctx, src.ID)
	if err != nil {
		t.Fatal(err)
	}
	srcVolume := h.mgr.VolumeName(got.WorkspaceID)
	labels := map[string]string{h.ns + ".managed": "true"} // so the namespace's cleanup takes what a failure leaves

	// 200 copies of the running, unfrozen workspace, straight through the driver.
	var whole, refused int
	for i := range 200 {
		dst := h.ns + "-swapcopy"
		_, err := h.drv.CopyVolume(ctx, srcVolume, dst, labels, 0)
		switch {
		case err == nil:
			whole++
			noCanary("a copy", mountOf(dst))
			if err := h.drv.RemoveVolume(ctx, dst); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(err.Error(), "changed during the copy"):
			refused++ // CopyVolume removed what it had made
		default:
			t.Fatalf("copy %d: %v", i, err)
		}
		hostUntouched("after a copy")
	}
	t.Logf("200 unfrozen copies under the swapper: %d whole, %d refused as changed", whole, refused)
	if h.volumeExists(h.ns + "-swapcopy") {
		t.Fatal("a refused copy left its volume")
	}

	// Snapshots and forks through the Manager, with the swapper still running: frozen for the copy, thawed after.
	for i := range 5 {
		snap, err := h.mgr.CreateSnapshot(ctx, src.ID, sandboxes.SnapshotRequest{})
		if err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		noCanary("snapshot", mountOf(snap.Volume))
		if err := h.mgr.DeleteSnapshot(ctx, snap.ID); err != nil {
			t.Fatal(err)
		}
		fork, err := h.mgr.Fork(ctx, src.ID, sandboxes.ForkRequest{})
		if err != nil {
			t.Fatalf("fork %d: %v", i, err)
		}
		fg, err := h.mgr.Get(ctx, fork.Sandbox.ID)
		if err != nil {
			t.Fatal(err)
		}
		noCanary("fork", mountOf(h.mgr.VolumeName(fg.WorkspaceID)))
		if err := h.mgr.Delete(ctx, fork.Sandbox.ID); err != nil {
			t.Fatal(err)
		}
		hostUntouched("after a snapshot and a fork")
		if testenv.Frozen(t, h.containerName(src.ID)) {
			t.Fatal("the source was left frozen")
		}
	}
}

// renameToggler is tenant code that keeps renaming 200 files x<i> to y<i> and back, in a loop of its own, so at
// any moment exactly one name of each pair exists. A copy that runs while it runs meets names that vanished
// between its listing and its visit; a frozen one never does. After its first full rounds it leaves
// /workspace/toggling.
const renameToggler = `
import os, subprocess, sys
os.mkdir('/workspace/t')
for i in range(200):
    open('/workspace/t/x%d' % i, 'w').write('%d\n' % i)
loop = '''
import os
os.chdir('/workspace/t')
n = 0
while True:
    for i in range(200):
        os.rename('x%d' % i, 'y%d' % i)
    for i in range(200):
        os.rename('y%d' % i, 'x%d' % i)
    n += 1
    if n == 20:
        open('/workspace/toggling', 'w').write('yes')
'''
subprocess.Popen([sys.executable, '-c', loop], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
print('ok')
`

// TestSnapshotFreezesWhenRecordLags: a sandbox recorded as stopped whose container runs (the state a stop that
// cancels a launch leaves until it takes the operation lock; here the container is started behind the Manager's
// back) is frozen for its snapshots and thawed after, because the capture asks the engine instead of trusting the
// record. Its tenant renames files as fast as it can meanwhile; every snapshot succeeds and holds exactly one name
// of each pair. On the code that froze only a record that said Running, the copy met vanished names and failed.
func TestSnapshotFreezesWhenRecordLags(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := h.create("small")
	h.ready(src.ID)
	if err := h.mgr.Stop(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := h.mgr.Get(ctx, src.ID); err != nil || got.Status != sandboxes.StatusIdle {
		t.Fatalf("after the stop: %+v %v", got, err)
	}
	if err := h.cli.ContainerStart(ctx, h.containerName(src.ID), container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := h.exec(src.ID, "python3", "-c", renameToggler)
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("starting the toggler: %s %v", out, err)
	}
	for deadline := time.Now().Add(testenv.WaitLimit); ; {
		if _, err := h.exec(src.ID, "test", "-e", "/workspace/toggling"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the toggler never got going")
		}
	}
	for i := range 5 {
		snap, err := h.mgr.CreateSnapshot(ctx, src.ID, sandboxes.SnapshotRequest{})
		if err != nil {
			t.Fatalf("snapshot %d of a running container recorded as stopped: %v", i, err)
		}
		v, err := h.cli.VolumeInspect(ctx, snap.Volume)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 200 {
			_, xerr := os.Lstat(filepath.Join(v.Mountpoint, "t", "x"+strconv.Itoa(j)))
			_, yerr := os.Lstat(filepath.Join(v.Mountpoint, "t", "y"+strconv.Itoa(j)))
			if (xerr == nil) == (yerr == nil) {
				t.Fatalf("snapshot %d holds both or neither of x%d and y%d: %v %v", i, j, j, xerr, yerr)
			}
		}
		if err := h.mgr.DeleteSnapshot(ctx, snap.ID); err != nil {
			t.Fatal(err)
		}
		if testenv.Frozen(t, h.containerName(src.ID)) {
			t.Fatalf("snapshot %d left the container frozen", i)
		}
	}
}
