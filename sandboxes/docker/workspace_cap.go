package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/volume"
	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/sandboxes"
)

// A capped workspace is an ext4 filesystem in a sparse image file of exactly its size, attached to a loop device
// and mounted by the engine's local driver (type ext4, device <link>). Writes past the size fail with ENOSPC in that
// filesystem only; the host's disk loses at most the size (the image is sparse: it takes what was written). df
// inside the sandbox shows the image's own size. Why this and not project quotas: the engine's data root here (and
// on most hosts) is ext4 mounted without prjquota, which cannot be turned on without unmounting it, and Docker 20.10's
// local driver cannot attach a loop device itself (o=loop is mount(8)'s, not the kernel's); see docs/customise.md.
//
// The volume's device option is a symlink, <links>/<volume>, to the loop device, never /dev/loopN itself: loop
// numbers are not stable across a host reboot, and a volume whose recorded /dev/loopN came to hold another
// workspace's image would mount that other tenant's files. Before anything mounts the volume (Create, Start, a copy)
// the driver checks that the link leads to a loop device whose backing file is this volume's image, and attaches
// the image again (and relinks) when not: after a reboot, or when the link dir was emptied.

// Default places of capped workspaces. The images sit on the engine's data disk (its free space is what they
// spend); links and private mounts are runtime state.
const (
	DefaultWorkspaceImageDir = "/var/lib/sandgate/workspaces"
	DefaultWorkspaceLinkDir  = "/run/sandgate/workspaces"
)

// capDirs are where capped workspaces live on the engine host.
type capDirs struct {
	images string // <volume>.img, sparse
	links  string // <volume> -> /dev/loopN; mnt/ holds the driver's private mounts during copies
	mu     sync.Mutex
}

func (d *Driver) capPaths() (images, links string) {
	d.caps.mu.Lock()
	defer d.caps.mu.Unlock()
	images, links = d.caps.images, d.caps.links
	if images == "" {
		images = DefaultWorkspaceImageDir
	}
	if links == "" {
		links = DefaultWorkspaceLinkDir
	}
	return images, links
}

// volumeNamePattern is what a capped volume may be called: its name becomes a file name on the host.
var volumeNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// WorkspaceImage is the image file of a capped volume.
func (d *Driver) WorkspaceImage(name string) string {
	images, _ := d.capPaths()
	return filepath.Join(images, name+".img")
}

func (d *Driver) workspaceLink(name string) string {
	_, links := d.capPaths()
	return filepath.Join(links, name)
}

// capped reports whether volume name is a capped one (its image exists) and its size.
func (d *Driver) capped(name string) (int64, bool) {
	if !volumeNamePattern.MatchString(name) {
		return 0, false
	}
	fi, err := os.Lstat(d.WorkspaceImage(name))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Size(), true
}

// createCapped makes a capped volume of size bytes: image, filesystem, loop device, link, then the engine volume.
// Every step is undone when a later one fails. A volume that exists already is left as it is (the engine's own
// create semantics), its loop device attached again if needed.
func (d *Driver) createCapped(ctx context.Context, name string, labels map[string]string, size int64) (volume.Volume, error) {
	if !volumeNamePattern.MatchString(name) {
		return volume.Volume{}, fmt.Errorf("volume name %q cannot carry a size limit", name)
	}
	if size < sandboxes.MinWorkspaceSize {
		return volume.Volume{}, fmt.Errorf("workspace size %d is below the minimum of %d bytes", size, sandboxes.MinWorkspaceSize)
	}
	if v, err := d.cli.VolumeInspect(ctx, name); err == nil {
		if _, ok := d.capped(name); ok {
			if err := d.ensureAttached(ctx, name); err != nil {
				return volume.Volume{}, err
			}
		}
		return v, nil
	}
	img := d.WorkspaceImage(name)
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return volume.Volume{}, fmt.Errorf("making the workspace image dir: %w", err)
	}
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Left by a create that died before the engine's volume existed (there is none): made again from scratch.
		if err := d.dropCapped(ctx, name); err != nil {
			return volume.Volume{}, fmt.Errorf("removing the stale image of workspace %s: %w", name, err)
		}
		f, err = os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return volume.Volume{}, fmt.Errorf("creating the image of workspace %s: %w", name, err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	undo := func() { d.dropCapped(context.WithoutCancel(ctx), name) }
	if err != nil {
		undo()
		return volume.Volume{}, fmt.Errorf("sizing the image of workspace %s: %w", name, err)
	}
	// -m 0: no blocks reserved for root (the sandbox user gets the whole size). The root's owner is set after the
	// mount below, with lost+found removed: a copy goes only into an empty volume, and tenants need no fsck dir.
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", img).CombinedOutput(); err != nil {
		undo()
		return volume.Volume{}, fmt.Errorf("making the filesystem of workspace %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	if err := d.ensureAttached(ctx, name); err != nil {
		undo()
		return volume.Volume{}, err
	}
	if err := d.withMounted(ctx, name, false, func(root string) error {
		if err := os.Remove(filepath.Join(root, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Chown(root, sandboxUID, sandboxUID); err != nil {
			return err
		}
		return os.Chmod(root, 0o755)
	}); err != nil {
		undo()
		return volume.Volume{}, fmt.Errorf("preparing workspace %s: %w", name, err)
	}
	v, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: labels,
		DriverOpts: map[string]string{"type": "ext4", "device": d.workspaceLink(name), "o": "nodev,nosuid"}})
	if err != nil {
		undo()
		return volume.Volume{}, fmt.Errorf("creating volume %s: %w", name, err)
	}
	return v, nil
}

// dropCapped detaches every loop device of name's image and removes its link and image. Run after the engine
// removed the volume (or never made it). A missing piece is fine.
func (d *Driver) dropCapped(ctx context.Context, name string) error {
	if !volumeNamePattern.MatchString(name) {
		return nil
	}
	img := d.WorkspaceImage(name)
	var errs []error
	for _, dev := range loopsOf(img) {
		if out, err := exec.CommandContext(ctx, "losetup", "-d", dev).CombinedOutput(); err != nil && attachedTo(dev) == img {
			errs = append(errs, fmt.Errorf("detaching %s: %w: %s", dev, err, strings.TrimSpace(string(out))))
		}
	}
	if err := os.Remove(d.workspaceLink(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ensureAttached makes name's link lead to a loop device backed by name's image. Serialised: two launches of one
// volume must not attach it twice.
func (d *Driver) ensureAttached(ctx context.Context, name string) error {
	img := d.WorkspaceImage(name)
	link := d.workspaceLink(name)
	d.attachMu.Lock()
	defer d.attachMu.Unlock()
	if dev, err := os.Readlink(link); err == nil && attachedTo(dev) == img {
		return nil
	}
	dev := ""
	if devs := loopsOf(img); len(devs) > 0 {
		dev = devs[0]
	} else {
		// Direct I/O: the image's pages are not cached twice (once for the loop device's filesystem, once for the
		// host's file), which more than doubled a 100 MB write's throughput here (bench/workspace_cap_test.go). A
		// backing filesystem without O_DIRECT gets a plain loop device.
		out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", "--nooverlap", "--direct-io=on", img).Output()
		if err != nil {
			out, err = exec.CommandContext(ctx, "losetup", "--find", "--show", "--nooverlap", img).Output()
		}
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
			}
			return fmt.Errorf("attaching the image of workspace %s: %w", name, err)
		}
		dev = strings.TrimSpace(string(out))
	}
	if attachedTo(dev) != img {
		return fmt.Errorf("attaching the image of workspace %s: %s is not backed by it", name, dev)
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		return fmt.Errorf("making the workspace link dir: %w", err)
	}
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(dev, tmp); err != nil {
		return fmt.Errorf("linking workspace %s: %w", name, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("linking workspace %s: %w", name, err)
	}
	return nil
}

// attachMounts attaches the loop devices of the capped volumes a container spec mounts, before the engine mounts
// them (a reboot detached them all).
func (d *Driver) attachMounts(ctx context.Context, spec sandboxes.ContainerSpec) error {
	if spec.Volume == "" {
		return nil
	}
	if _, ok := d.capped(spec.Volume); !ok {
		return nil
	}
	return d.ensureAttached(ctx, spec.Volume)
}

// withMounted mounts name's filesystem on a private directory of the gateway (read-only when ro) and runs fn on
// its root, then unmounts it. The engine's mountpoint holds the files only while a container uses the volume, so
// copies mount the device themselves. The mount is nosuid, nodev and noexec: nothing on it is run or opened as a
// device by the gateway, and copytree walks it by descriptors as it walks any other volume.
func (d *Driver) withMounted(ctx context.Context, name string, ro bool, fn func(root string) error) error {
	if err := d.ensureAttached(ctx, name); err != nil {
		return err
	}
	_, links := d.capPaths()
	base := filepath.Join(links, "mnt")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return fmt.Errorf("making the private mount dir: %w", err)
	}
	// The gateway's pid in the name: a sweep (sweepCapped) unmounts only what a gateway no longer running left.
	dir, err := os.MkdirTemp(base, strconv.Itoa(os.Getpid())+"-"+name+"-")
	if err != nil {
		return fmt.Errorf("making a private mount dir: %w", err)
	}
	defer os.Remove(dir)
	dev, err := os.Readlink(d.workspaceLink(name))
	if err != nil {
		return fmt.Errorf("reading the link of workspace %s: %w", name, err)
	}
	// The superblock may be mounted read-write by the engine already: a second mount of it must ask for the same
	// read-write state, and is then made read-only per mount with a bind remount.
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount(dev, dir, "ext4", flags, ""); err != nil {
		return fmt.Errorf("mounting workspace %s: %w", name, err)
	}
	defer func() {
		if unix.Unmount(dir, 0) != nil {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	}()
	if ro {
		if err := unix.Mount("", dir, "", flags|unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making the mount of workspace %s read-only: %w", name, err)
		}
	}
	return fn(dir)
}

// orphanImageAge is how old an image with no engine volume must be before a sweep removes it: younger, it may be a
// create in progress (the image is made before the volume).
const orphanImageAge = 10 * time.Minute

// sweepCapped undoes what a gateway that died mid-way left: private copy mounts of a gateway no longer running, and
// images (with their loop devices and links) whose engine volume was never made or is gone. Run at start (Check).
func (d *Driver) sweepCapped(ctx context.Context) error {
	images, links := d.capPaths()
	var errs []error
	mounts, _ := os.ReadDir(filepath.Join(links, "mnt"))
	for _, m := range mounts {
		pid, _, _ := strings.Cut(m.Name(), "-")
		if _, err := os.Stat(filepath.Join("/proc", pid)); err == nil && pid != "" {
			continue
		}
		dir := filepath.Join(links, "mnt", m.Name())
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing a stale workspace mount: %w", err))
		}
	}
	imgs, _ := filepath.Glob(filepath.Join(images, "*.img"))
	for _, img := range imgs {
		name := strings.TrimSuffix(filepath.Base(img), ".img")
		fi, err := os.Stat(img)
		if err != nil || time.Since(fi.ModTime()) < orphanImageAge {
			continue
		}
		if _, err := d.cli.VolumeInspect(ctx, name); err == nil || !cerrdefs.IsNotFound(err) {
			continue
		}
		if err := d.dropCapped(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("removing the orphan workspace image %s: %w", img, err))
		}
	}
	return errors.Join(errs...)
}

// loopsOf lists the loop devices whose backing file is img, from sysfs.
func loopsOf(img string) []string {
	entries, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(e)
		if err != nil || strings.TrimSpace(string(b)) != img {
			continue
		}
		out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(e))))
	}
	return out
}

// attachedTo is the backing file of loop device dev ("" when it has none or is no loop device).
func attachedTo(dev string) string {
	base := filepath.Base(dev)
	if !strings.HasPrefix(base, "loop") || filepath.Dir(dev) != "/dev" {
		return ""
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(base, "loop")); err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", base, "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
