package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"sync"

	"github.com/docker/docker/api/types/volume"
	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/sandboxes"
)

// CopyVolume creates the volume dst and copies every file of src into it, on the engine host's disk: the
// gateway reads and writes the local driver's mountpoints directly, so the copy costs what `cp -a` of the same
// bytes costs (and a reflink where the filesystem has them). A gateway that cannot reach the mountpoints (a remote
// engine, a rootless gateway) gets sandboxes.ErrVolumesUnreachable. dst is removed again when the copy fails.
// Besides the bytes, a copy costs at most one engine call (creating dst, unless CreateVolume just made it): src's
// mountpoint is remembered from its creation or an earlier copy, and is looked up (in parallel) only the first time.
//
// A capped source (workspace_cap.go) makes a capped copy of the same size, unless labels name another size; a copy
// that does not fit fails with sandboxes.ErrWorkspaceFull and leaves no dst.
func (d *Driver) CopyVolume(ctx context.Context, src, dst string, labels map[string]string, limit int64) (sandboxes.CopyStats, error) {
	srcSize, _ := d.capped(src)
	dstSize := sandboxes.WorkspaceSizeOf(labels)
	if dstSize == 0 {
		dstSize = srcSize
	}
	if srcSize > 0 || dstSize > 0 {
		return d.copyCapped(ctx, src, dst, labels, limit, srcSize > 0, dstSize)
	}
	var (
		srcMount string
		srcErr   error
		wg       sync.WaitGroup
	)
	if mp, ok := d.knownMountpoint(src); ok {
		srcMount = mp // the usual case: no engine call, so no goroutine to wait for on a busy host either
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srcMount, srcErr = d.mountpoint(ctx, src)
		}()
	}
	var dv volume.Volume
	var err error
	if mp, ok := d.mounts.Load(dst); ok {
		// Made by CreateVolume just before (the Manager creates it while it freezes the source): no engine call.
		dv = volume.Volume{Name: dst, Driver: "local", Mountpoint: mp.(string), Labels: labels}
	} else {
		dv, err = d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: dst, Driver: "local", Labels: labels})
	}
	wg.Wait()
	if err != nil {
		return sandboxes.CopyStats{}, fmt.Errorf("creating volume %s: %w", dst, err)
	}
	// The engine answers a create of an existing name with that volume: a copy goes only into a volume that is
	// ours (our labels) and empty, and a volume that was there before is never removed by a failed copy here.
	if !maps.Equal(dv.Labels, labels) {
		return sandboxes.CopyStats{}, fmt.Errorf("volume %s already exists", dst)
	}
	fail := func(err error) (sandboxes.CopyStats, error) {
		_ = d.RemoveVolume(context.WithoutCancel(ctx), dst)
		return sandboxes.CopyStats{}, err
	}
	if srcErr != nil {
		return fail(srcErr)
	}
	if err := reachable(dv); err != nil {
		return fail(err)
	}
	if entries, err := os.ReadDir(dv.Mountpoint); err != nil || len(entries) > 0 {
		return sandboxes.CopyStats{}, fmt.Errorf("volume %s already exists and is not empty", dst)
	}
	d.mounts.Store(dst, dv.Mountpoint)
	stats, err := copyTree(ctx, srcMount, dv.Mountpoint, limit)
	if err != nil {
		_ = d.RemoveVolume(context.WithoutCancel(ctx), dst)
		return stats, fmt.Errorf("copying volume %s to %s: %w", src, dst, err)
	}
	return stats, nil
}

// copyCapped is CopyVolume where either side is capped: a capped side is mounted privately for the copy (the
// source read-only), an unlimited one is read at the engine's mountpoint.
func (d *Driver) copyCapped(ctx context.Context, src, dst string, labels map[string]string, limit int64, srcCapped bool, dstSize int64) (sandboxes.CopyStats, error) {
	if err := d.takeCopyTarget(ctx, dst, labels, dstSize); err != nil {
		return sandboxes.CopyStats{}, err
	}
	var stats sandboxes.CopyStats
	copyInto := func(dstRoot string) error {
		empty, err := emptyDir(dstRoot)
		if err != nil || !empty {
			return errNotEmpty
		}
		copyFrom := func(srcRoot string) error {
			var err error
			stats, err = copyTree(ctx, srcRoot, dstRoot, limit)
			return err
		}
		if srcCapped {
			return d.withMounted(ctx, src, true, copyFrom)
		}
		srcMount, err := d.mountpoint(ctx, src)
		if err != nil {
			return err
		}
		return copyFrom(srcMount)
	}
	var err error
	if dstSize > 0 {
		err = d.withMounted(ctx, dst, false, copyInto)
	} else {
		var mp string
		if mp, err = d.mountpoint(ctx, dst); err == nil {
			err = copyInto(mp)
		}
	}
	if errors.Is(err, errNotEmpty) {
		// Not made for this copy: a volume that was there before is never removed by a failed copy.
		return sandboxes.CopyStats{}, fmt.Errorf("volume %s already exists and is not empty", dst)
	}
	if err != nil {
		_ = d.RemoveVolume(context.WithoutCancel(ctx), dst)
		if errors.Is(err, unix.ENOSPC) {
			err = fmt.Errorf("%w (%d bytes): %w", sandboxes.ErrWorkspaceFull, dstSize, err)
		}
		return stats, fmt.Errorf("copying volume %s to %s: %w", src, dst, err)
	}
	return stats, nil
}

var errNotEmpty = errors.New("the copy's destination is not empty")

// takeCopyTarget makes dst for a copy with size (0: unlimited), or takes the empty volume of ours that CreateVolume
// (or a spare, spare_volume.go) made for it; one of the wrong kind is replaced while it is still empty.
func (d *Driver) takeCopyTarget(ctx context.Context, dst string, labels map[string]string, size int64) error {
	v, err := d.cli.VolumeInspect(ctx, dst)
	if err == nil {
		// The engine's create of an existing name answers that volume: a copy goes only into one that is ours.
		if !maps.Equal(v.Labels, labels) {
			return fmt.Errorf("volume %s already exists", dst)
		}
		have, _ := d.capped(dst)
		if have == size {
			return nil
		}
		var empty bool
		if have > 0 {
			err = d.withMounted(ctx, dst, true, func(root string) error {
				empty, err = emptyDir(root)
				return err
			})
		} else if v.Driver == "local" && len(v.Options) == 0 {
			empty, err = emptyDir(v.Mountpoint)
		}
		if err != nil || !empty {
			return fmt.Errorf("volume %s already exists and is not empty", dst)
		}
		if err := d.RemoveVolume(ctx, dst); err != nil {
			return fmt.Errorf("replacing volume %s with one of %d bytes: %w", dst, size, err)
		}
	}
	if size > 0 {
		_, err = d.createCapped(ctx, dst, labels, size)
	} else {
		err = d.CreateVolume(ctx, dst, labels)
	}
	if err != nil {
		return fmt.Errorf("creating volume %s: %w", dst, err)
	}
	return nil
}

// emptyDir says whether dir has no entries.
func emptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0 && err == nil, err
}

// knownMountpoint is a remembered mountpoint that still exists.
func (d *Driver) knownMountpoint(name string) (string, bool) {
	if mp, ok := d.mounts.Load(name); ok {
		if _, err := os.Stat(mp.(string)); err == nil {
			return mp.(string), true
		}
		d.mounts.Delete(name)
	}
	return "", false
}

// mountpoint is where a local volume's files are on this host, remembered once known (it never changes for a
// name: the local driver keeps it under its root).
func (d *Driver) mountpoint(ctx context.Context, name string) (string, error) {
	if mp, ok := d.knownMountpoint(name); ok {
		return mp, nil
	}
	v, err := d.cli.VolumeInspect(ctx, name)
	if err != nil {
		return "", fmt.Errorf("inspecting volume %s: %w", name, err)
	}
	if err := reachable(v); err != nil {
		return "", err
	}
	d.mounts.Store(name, v.Mountpoint)
	return v.Mountpoint, nil
}

// mountCache maps a volume name to its mountpoint on this host.
type mountCache struct{ sync.Map }

func reachable(v volume.Volume) error {
	if v.Driver != "local" || v.Mountpoint == "" {
		return fmt.Errorf("%w: volume %s uses driver %q", sandboxes.ErrVolumesUnreachable, v.Name, v.Driver)
	}
	if _, err := os.Stat(v.Mountpoint); err != nil {
		return fmt.Errorf("%w: %v", sandboxes.ErrVolumesUnreachable, err)
	}
	return nil
}

var _ sandboxes.VolumeCopier = (*Driver)(nil)
