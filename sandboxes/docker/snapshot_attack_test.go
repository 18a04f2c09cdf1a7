package docker_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/sandboxes"
)

// hostileWorkspace is what a tenant leaves in /workspace to make the gateway's copy read or write outside the
// volume, hang, or fill the engine's disk. HOSTDIR is a directory on the gateway's host.
const hostileWorkspace = `
import os, socket, subprocess
w = '/workspace'
host = os.environ['HOSTDIR']
os.symlink(host + '/secret', w + '/secret-link')        # would copy the host's file if followed
os.symlink(host + '/created', w + '/write-through')     # would create a host file if written through
os.symlink('/', w + '/rootlink')
os.symlink(host, w + '/hostdir')
os.symlink('../../../../../../../../etc/shadow', w + '/up')
os.makedirs(w + '/real/sub')
os.symlink(host, w + '/real/sub/deep')
open(w + '/data', 'w').write('tenant data\n')
os.link(w + '/data', w + '/hard')
os.mkfifo(w + '/fifo')                                 # opening it would block the copy forever
s = socket.socket(socket.AF_UNIX); s.bind(w + '/sock')  # cannot be copied: skipped
for name in [b'new\nline', b'-rf', b'\xff\xfe', b'x' * 255, b' spaced ', b'..dots', b'back\\slash']:
    open(os.path.join(w.encode(), name), 'wb').write(name)
open(w + '/locked', 'w').write('no one may read\n'); os.chmod(w + '/locked', 0)
os.mkdir(w + '/vault'); open(w + '/vault/inner', 'w').write('inner\n'); os.chmod(w + '/vault', 0)
open(w + '/suid', 'w').write('#!/bin/sh\n'); os.chmod(w + '/suid', 0o4755)
with open(w + '/sparse', 'wb') as f:                     # 8 GiB apparent, a few bytes of data
    f.write(b'start'); f.seek(4 << 30); f.write(b'middle'); f.truncate(8 << 30)
os.mkdir(w + '/swap')
try:
    os.mknod(w + '/null', 0o20666, os.makedev(1, 3))
    print('mknod succeeded')
except OSError as e:
    print('mknod refused:', e.strerror)
# While the workspace is unfrozen, swap a directory for a link to the host as fast as possible: a copy that ran
# unfrozen, or walked by path, could be steered through it.
subprocess.Popen(['sh', '-c', 'while :; do mv swap swap.d && ln -s "$HOSTDIR" swap && rm swap && mv swap.d swap; done'],
    cwd=w, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
print('ok')
`

// treeEntry is one file of a volume as the host sees it.
type treeEntry struct {
	mode         fs.FileMode
	uid, gid     uint32
	size, nlink  int64
	allocated    int64 // bytes on disk
	link, digest string
}

// hostTree lists every file under root as root sees it, never following a link nor opening anything but
// regular files.
func hostTree(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		e := treeEntry{mode: info.Mode(), uid: st.Uid, gid: st.Gid, size: info.Size(), nlink: int64(st.Nlink), allocated: st.Blocks * 512}
		if info.IsDir() {
			e.size, e.nlink, e.allocated = 0, 0, 0 // directory sizes and link counts depend on the filesystem's history
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			e.link, err = os.Readlink(path)
		case info.Mode().IsRegular() && info.Size() > 64<<20:
			e.digest = "large: not read" // the sparse file: checked at its data offsets instead
		case info.Mode().IsRegular():
			var f *os.File
			if f, err = os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0); err == nil {
				h := sha256.New()
				_, err = io.Copy(h, f)
				f.Close()
				e.digest = fmt.Sprintf("%x", h.Sum(nil))
			}
		}
		out[rel] = e
		return err
	})
	if err != nil {
		t.Fatalf("listing %s: %v", root, err)
	}
	return out
}

// TestForkHostileWorkspace: a tenant's workspace full of links to the host, a link swapped in and out as fast as
// it can, a fifo, a socket, hard links, odd names, unreadable files and directories, setuid bits and an 8 GiB sparse
// file is forked on the real engine. The copy reads and writes nothing outside the two volumes (the host's files
// are untouched, nothing is created through a link), copies every link as a link, keeps names, modes, owners and
// hard links, skips the socket, does not hang on the fifo, keeps the sparse file sparse, and both sandboxes run on.
func TestForkHostileWorkspace(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hostDir := t.TempDir()
	const secret = "host secret\n"
	if err := os.WriteFile(filepath.Join(hostDir, "secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	src := h.create("small")
	h.ready(src.ID)
	out, err := h.exec(src.ID, "env", "HOSTDIR="+hostDir, "python3", "-c", hostileWorkspace)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "ok") {
		t.Fatalf("building the hostile workspace: %s %v", out, err)
	}
	t.Logf("tenant: %s", strings.TrimSpace(out))

	fork, err := h.mgr.Fork(ctx, src.ID, sandboxes.ForkRequest{})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	t.Logf("fork copy: %+v", fork.Copy)
	if fork.Copy.Skipped < 1 || (fork.Copy.Method != sandboxes.CopyStreamed && fork.Copy.Method != sandboxes.CopyReflink) {
		t.Errorf("copy stats %+v: the socket was not skipped or no method reported", fork.Copy)
	}
	h.ready(fork.Sandbox.ID)
	// Stop the swapper so both trees hold still; the fork's copy of the loop is not running (it never started
	// there), but stop it anyway in case.
	for _, id := range []string{src.ID, fork.Sandbox.ID} {
		_, _ = h.exec(id, "pkill", "-f", "while :")
	}

	// Nothing on the host was read into the fork or written through a link.
	entries, err := os.ReadDir(hostDir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "secret" {
		t.Fatalf("the host directory changed: %v %v", entries, err)
	}
	if b, err := os.ReadFile(filepath.Join(hostDir, "secret")); err != nil || string(b) != secret {
		t.Fatalf("the host's secret changed: %q %v", b, err)
	}

	mount := func(id string) string {
		got, err := h.mgr.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		v, err := h.cli.VolumeInspect(ctx, h.mgr.VolumeName(got.WorkspaceID))
		if err != nil {
			t.Fatal(err)
		}
		return v.Mountpoint
	}
	srcTree, forkTree := hostTree(t, mount(src.ID)), hostTree(t, mount(fork.Sandbox.ID))
	var names []string
	for name := range srcTree {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want, got := srcTree[name], forkTree[name]
		if name == "sock" {
			if _, ok := forkTree[name]; ok {
				t.Errorf("the socket was copied")
			}
			continue
		}
		if strings.HasPrefix(name, "swap") {
			continue // compared below: the swapper may have been stopped between its steps
		}
		if _, ok := forkTree[name]; !ok {
			t.Errorf("%q is missing from the fork", name)
			continue
		}
		if name == "sparse" && (got.size != 8<<30 || got.allocated > 1<<20) {
			t.Errorf("sparse file in the fork: size %d, %d bytes allocated", got.size, got.allocated)
		}
		got.allocated, want.allocated = 0, 0 // allocation depends on the filesystem's history
		if got != want {
			t.Errorf("%q differs:\n fork %+v\n want %+v", name, got, want)
		}
	}
	for name := range forkTree {
		if _, ok := srcTree[name]; !ok && !strings.HasPrefix(name, "swap") {
			t.Errorf("the fork has %q, which the source has not", name)
		}
	}
	for _, name := range []string{"secret-link", "write-through", "rootlink", "hostdir", "up", "real/sub/deep"} {
		if forkTree[name].mode&fs.ModeSymlink == 0 {
			t.Errorf("%s is not a link in the fork: %+v", name, forkTree[name])
		}
	}
	if forkTree["hard"].nlink != 2 || forkTree["vault"].mode.Perm() != 0 || forkTree["suid"].mode&fs.ModeSetuid == 0 {
		t.Errorf("hard link, 000 directory or setuid bit lost: %+v %+v %+v", forkTree["hard"], forkTree["vault"], forkTree["suid"])
	}
	if f, err := os.Open(filepath.Join(mount(fork.Sandbox.ID), "sparse")); err != nil {
		t.Error(err)
	} else {
		buf := make([]byte, 6)
		if _, err := f.ReadAt(buf, 4<<30); err != nil || string(buf) != "middle" {
			t.Errorf("the sparse file's data at 4 GiB: %q %v", buf, err)
		}
		if _, err := f.ReadAt(buf[:5], 0); err != nil || string(buf[:5]) != "start" {
			t.Errorf("the sparse file's data at 0: %q %v", buf[:5], err)
		}
		if _, err := f.ReadAt(buf, 6<<30); err != nil || string(buf) != "\x00\x00\x00\x00\x00\x00" {
			t.Errorf("the sparse file's hole at 6 GiB: %q %v", buf, err)
		}
		f.Close()
	}
	if forkTree["fifo"].mode&fs.ModeNamedPipe == 0 {
		t.Errorf("fifo: %+v", forkTree["fifo"])
	}
	// The swapped directory was copied as what it was at the freeze: a directory or a link, never the host's files.
	for name, e := range forkTree {
		if strings.HasPrefix(name, "swap") && e.mode.IsRegular() && e.digest == fmt.Sprintf("%x", sha256.Sum256([]byte(secret))) {
			t.Errorf("the host's secret reached the fork as %s", name)
		}
	}

	// Both run on, independent.
	if out, err := h.exec(fork.Sandbox.ID, "sh", "-c", "cat /workspace/data && echo fork > /workspace/data"); err != nil || out != "tenant data\n" {
		t.Fatalf("fork: %q %v", out, err)
	}
	if out, err := h.exec(src.ID, "cat", "/workspace/data"); err != nil || out != "tenant data\n" {
		t.Fatalf("source after the fork wrote: %q %v", out, err)
	}
}
