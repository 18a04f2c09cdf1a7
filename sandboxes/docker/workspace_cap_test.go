package docker_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

const testCap = 64 << 20

// capDirs gives the test's capped workspaces their own image and link dirs, and registers (before the harness, so
// it runs after the harness removed the containers and volumes) a cleanup that detaches every loop device still
// backed by an image there: nothing the test made outlives it, whatever failed.
func capDirs(t *testing.T) (images, links string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("capped workspaces need root (losetup, mount)")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("capped workspaces need mkfs.ext4")
	}
	dir := t.TempDir()
	images, links = filepath.Join(dir, "images"), filepath.Join(dir, "links")
	t.Cleanup(func() {
		imgs, _ := filepath.Glob(filepath.Join(images, "*.img"))
		for _, img := range imgs {
			for _, dev := range loopDevices(t, img) {
				_ = exec.Command("losetup", "-d", dev).Run()
			}
			_ = os.Remove(img)
		}
	})
	return images, links
}

// loopDevices are the loop devices `losetup -j` lists for img.
func loopDevices(t *testing.T, img string) []string {
	t.Helper()
	out, err := exec.Command("losetup", "-j", img).Output()
	if err != nil {
		t.Fatalf("losetup -j %s: %v", img, err)
	}
	var devs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if dev, _, ok := strings.Cut(line, ":"); ok {
			devs = append(devs, dev)
		}
	}
	return devs
}

// freeBytes is what unprivileged users may still write on the filesystem of path.
func freeBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// dockerRoot is the engine's data root.
func (h *harness) dockerRoot() string {
	h.t.Helper()
	info, err := h.cli.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info.DockerRootDir
}

// dfSize is the size of /workspace as df in the sandbox reports it.
func (h *harness) dfSize(id string) int64 {
	h.t.Helper()
	out, err := h.exec(id, "df", "-B1", "--output=size", "/workspace")
	if err != nil {
		h.t.Fatalf("df: %s %v", out, err)
	}
	fields := strings.Fields(out)
	n, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		h.t.Fatalf("df said %q", out)
	}
	return n
}

// TestWorkspaceCapOnTheEngine: a sandbox whose profile says workspace_size 64m writes in a tight loop and stops at
// the cap with "No space left on device"; the host's disk loses no more than the cap, a neighbour still writes, and
// df shows the cap. A snapshot and a fork of the capped workspace are capped the same (the fork refuses the same
// flood); removing the volumes detaches their loop devices and removes their images. On the old code the dd wrote
// the whole 1 GB to the host's disk and df showed the host's size.
func TestWorkspaceCapOnTheEngine(t *testing.T) {
	images, links := capDirs(t)
	capped := smallProfile("capped", "")
	capped.Resources.WorkspaceSize = "64m"
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{capped, smallProfile("open", "")}})
	h.drv.SetWorkspaceDirs(images, links)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	a, b := h.create("capped"), h.create("open")
	h.ready(a.ID)
	h.ready(b.ID)
	vol := h.mgr.VolumeName(a.WorkspaceID)
	img := h.drv.WorkspaceImage(vol)
	if got := h.drv.CappedSize(vol); got != testCap {
		t.Fatalf("the workspace volume's cap is %d, want %d", got, testCap)
	}
	if got := h.drv.CappedSize(h.mgr.VolumeName(b.WorkspaceID)); got != 0 {
		t.Fatalf("the uncapped profile's volume has a cap of %d", got)
	}

	root := h.dockerRoot()
	before := freeBytes(t, root)
	out, err := h.exec(a.ID, "sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=1024 conv=fsync")
	if err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("dd past the cap: %v\n%s", err, out)
	}
	spent := before - freeBytes(t, root)
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("the 1 GB flood: host free space dropped by %d MiB (other tenants of this machine included); the image holds %d MiB",
		spent>>20, st.Blocks*512>>20)
	if st.Blocks*512 > testCap {
		t.Fatalf("the image holds %d bytes, more than the cap", st.Blocks*512)
	}
	// The image's blocks are all the host spends on the flood. The free space is the host's, shared with other
	// writers (image builds, other tests): it is held to half the flood, which the old code wrote whole.
	if spent > 512<<20 {
		t.Fatalf("the host lost %d MiB to a sandbox capped at 64 MiB", spent>>20)
	}
	if out, err := h.exec(b.ID, "sh", "-c", "dd if=/dev/zero of=/workspace/small bs=1M count=8 conv=fsync"); err != nil {
		t.Fatalf("the neighbour could not write: %v\n%s", err, out)
	}
	if size := h.dfSize(a.ID); size > testCap || size < testCap*3/4 {
		t.Fatalf("df /workspace shows %d bytes, want about %d", size, testCap)
	}
	// A file streamed in through the agent (an upload, a file import between sandboxes, a cargo import) that does
	// not fit is a typed no_space, and leaves no partial file behind.
	if out, err := h.exec(a.ID, "rm", "/workspace/big"); err != nil {
		t.Fatal(out, err)
	}
	tg := h.ready(a.ID)
	_, err = agentapi.NewClient("http://"+tg.Addr, tg.Token, nil).Upload(ctx, "in/huge", io.LimitReader(zeros{}, 2*testCap), agentapi.UploadOptions{})
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Code != agentapi.CodeNoSpace {
		t.Fatalf("an upload past the cap: %v", err)
	}
	if out, _ := h.exec(a.ID, "sh", "-c", "ls -A /workspace/in 2>/dev/null | wc -l"); strings.TrimSpace(out) != "0" {
		t.Fatalf("the refused upload left files: %s", out)
	}

	// Snapshot and fork of the capped workspace keep the cap.
	if out, err := h.exec(a.ID, "sh", "-c", "rm /workspace/big; head -c 10485760 /dev/urandom > /workspace/ten; sha256sum /workspace/ten"); err != nil {
		t.Fatal(out, err)
	}
	sum, _ := h.exec(a.ID, "sha256sum", "/workspace/ten")
	snap, err := h.mgr.CreateSnapshot(ctx, a.ID, sandboxes.SnapshotRequest{})
	if err != nil {
		t.Fatalf("snapshot of a capped workspace: %v", err)
	}
	if got := h.drv.CappedSize(snap.Volume); got != testCap {
		t.Fatalf("the snapshot's volume cap is %d, want %d", got, testCap)
	}
	fork, err := h.mgr.Fork(ctx, a.ID, sandboxes.ForkRequest{})
	if err != nil {
		t.Fatalf("fork of a capped workspace: %v", err)
	}
	fvol := h.mgr.VolumeName(fork.Sandbox.WorkspaceID)
	if got := h.drv.CappedSize(fvol); got != testCap {
		t.Fatalf("the fork's volume cap is %d, want %d", got, testCap)
	}
	h.ready(fork.Sandbox.ID)
	if got, _ := h.exec(fork.Sandbox.ID, "sha256sum", "/workspace/ten"); got != sum {
		t.Fatalf("the fork's file: %q, want %q", got, sum)
	}
	if out, err := h.exec(fork.Sandbox.ID, "sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=200"); err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("dd past the fork's cap: %v\n%s", err, out)
	}
	restored, _, err := h.mgr.CreateFromSnapshot(ctx, sandboxes.CreateRequest{Owner: "tester"}, snap.ID)
	if err != nil {
		t.Fatalf("restoring a capped snapshot: %v", err)
	}
	h.ready(restored.ID)
	if got, _ := h.exec(restored.ID, "sha256sum", "/workspace/ten"); got != sum {
		t.Fatalf("the restored file: %q, want %q", got, sum)
	}

	// Removal detaches the loop devices and removes the images.
	imgs := map[string]string{}
	for _, v := range []string{vol, fvol, snap.Volume, h.mgr.VolumeName(restored.WorkspaceID)} {
		imgs[v] = h.drv.WorkspaceImage(v)
		if len(loopDevices(t, imgs[v])) != 1 {
			t.Fatalf("volume %s: loop devices %v", v, loopDevices(t, imgs[v]))
		}
	}
	for _, id := range []string{a.ID, fork.Sandbox.ID, restored.ID} {
		if err := h.mgr.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.mgr.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	for v, img := range imgs {
		if h.volumeExists(v) {
			t.Errorf("volume %s is still there", v)
		}
		if devs := loopDevices(t, img); len(devs) != 0 {
			t.Errorf("volume %s: loop devices left: %v", v, devs)
		}
		if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("volume %s: image left: %v", v, err)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestWorkspaceCopyOverCap: a copy into a volume whose cap is smaller than the files fails with
// sandboxes.ErrWorkspaceFull and leaves neither the volume nor its image or loop device; a volume made before caps
// existed (a plain local volume) copies into a capped one.
func TestWorkspaceCopyOverCap(t *testing.T) {
	images, links := capDirs(t)
	capped := smallProfile("capped", "")
	capped.Resources.WorkspaceSize = "64m"
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{capped, smallProfile("open", "")}})
	h.drv.SetWorkspaceDirs(images, links)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, old := h.create("capped"), h.create("open")
	h.ready(a.ID)
	h.ready(old.ID)
	for _, id := range []string{a.ID, old.ID} {
		if out, err := h.exec(id, "sh", "-c", "head -c 41943040 /dev/urandom > /workspace/forty"); err != nil {
			t.Fatal(out, err)
		}
	}
	labels := map[string]string{h.ns + ".managed": "true", h.ns + "." + sandboxes.LabelWorkspaceSize: strconv.Itoa(32 << 20)}
	for _, src := range []string{h.mgr.VolumeName(a.WorkspaceID), h.mgr.VolumeName(old.WorkspaceID)} {
		dst := h.ns + "-overcap"
		_, err := h.drv.CopyVolume(ctx, src, dst, labels, 0)
		if !errors.Is(err, sandboxes.ErrWorkspaceFull) {
			t.Fatalf("copy of 40 MB from %s into a 32 MiB volume: %v", src, err)
		}
		if h.volumeExists(dst) {
			t.Fatalf("the failed copy left volume %s", dst)
		}
		if _, err := os.Stat(h.drv.WorkspaceImage(dst)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the failed copy left its image: %v", err)
		}
	}
	// The uncapped (pre-upgrade) volume copies into a capped one that fits.
	labels[h.ns+"."+sandboxes.LabelWorkspaceSize] = strconv.Itoa(testCap)
	dst := h.ns + "-upgraded"
	stats, err := h.drv.CopyVolume(ctx, h.mgr.VolumeName(old.WorkspaceID), dst, labels, 0)
	if err != nil {
		t.Fatalf("copying an unlimited volume into a capped one: %v", err)
	}
	if stats.Bytes != 40<<20 || h.drv.CappedSize(dst) != testCap {
		t.Fatalf("copy %+v, cap %d", stats, h.drv.CappedSize(dst))
	}
	if err := h.drv.RemoveVolume(ctx, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.drv.WorkspaceImage(dst)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("RemoveVolume left the image: %v", err)
	}
}

// TestWorkspaceCapReattach: what a host reboot does to capped workspaces (loop devices detached, numbers reshuffled)
// is repaired at the next start: a stopped sandbox whose loop device is gone starts with its files, and one whose
// link was left pointing at another workspace's loop device (a reused /dev/loopN) gets its own files, never the
// other tenant's. A volume whose engine record is gone has its image, link and loop device swept at start (Check).
func TestWorkspaceCapReattach(t *testing.T) {
	images, links := capDirs(t)
	capped := smallProfile("capped", "")
	capped.Resources.WorkspaceSize = "32m"
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{capped}})
	h.drv.SetWorkspaceDirs(images, links)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, b := h.create("capped"), h.create("capped")
	for _, sb := range []*sandboxes.Sandbox{a, b} {
		h.ready(sb.ID)
		if out, err := h.exec(sb.ID, "sh", "-c", "echo "+sb.ID+" > /workspace/who"); err != nil {
			t.Fatal(out, err)
		}
		if err := h.mgr.Stop(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	va, vb := h.mgr.VolumeName(a.WorkspaceID), h.mgr.VolumeName(b.WorkspaceID)
	// a: detached, as after a reboot. b: its link leads to a's device once a is attached again.
	for _, dev := range loopDevices(t, h.drv.WorkspaceImage(va)) {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Fatalf("detaching %s: %s %v", dev, out, err)
		}
	}
	h.ready(a.ID)
	if out, _ := h.exec(a.ID, "cat", "/workspace/who"); strings.TrimSpace(out) != a.ID {
		t.Fatalf("after a reattach, a reads %q", out)
	}
	devA := loopDevices(t, h.drv.WorkspaceImage(va))
	if len(devA) != 1 {
		t.Fatalf("a's loop devices: %v", devA)
	}
	linkB := filepath.Join(links, vb)
	if err := os.Remove(linkB); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(devA[0], linkB); err != nil {
		t.Fatal(err)
	}
	h.ready(b.ID)
	if out, _ := h.exec(b.ID, "cat", "/workspace/who"); strings.TrimSpace(out) != b.ID {
		t.Fatalf("b, whose link led to a's device, reads %q", out)
	}

	// An image whose volume is gone (removed behind the gateway's back) is swept at start, loop device included.
	if err := h.mgr.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	orphan := h.ns + "-orphan"
	if err := h.drv.CreateVolume(ctx, orphan, map[string]string{h.ns + ".managed": "true", sandboxes.LabelWorkspaceSize: strconv.Itoa(32 << 20)}); err != nil {
		t.Fatal(err)
	}
	if err := h.cli.VolumeRemove(ctx, orphan, false); err != nil {
		t.Fatal(err)
	}
	img := h.drv.WorkspaceImage(orphan)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(img, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := h.drv.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) || len(loopDevices(t, img)) != 0 {
		t.Fatalf("the orphan image is still there (%v) or attached (%v)", err, loopDevices(t, img))
	}
	if _, err := os.Stat(h.drv.WorkspaceImage(vb)); err != nil {
		t.Fatalf("the sweep removed a live workspace's image: %v", err)
	}
	// An image a dead create left (no engine volume yet) does not block the next create of that name.
	stale := h.ns + "-stale"
	if err := os.WriteFile(h.drv.WorkspaceImage(stale), []byte("half made"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.drv.CreateVolume(ctx, stale, map[string]string{h.ns + ".managed": "true", sandboxes.LabelWorkspaceSize: strconv.Itoa(32 << 20)}); err != nil {
		t.Fatalf("create over a stale image: %v", err)
	}
	if got := h.drv.CappedSize(stale); got != 32<<20 {
		t.Fatalf("cap %d after a create over a stale image", got)
	}
	if err := h.drv.RemoveVolume(ctx, stale); err != nil {
		t.Fatal(err)
	}
}
