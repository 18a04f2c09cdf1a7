package docker

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sync"

	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/sandboxes"
)

// CopyVolume creates the volume dst and copies every file of src into it, on the engine host's disk: the
// gateway reads and writes the local driver's mountpoints directly, so the copy costs what `cp -a` of the same
// bytes costs (and a reflink where the filesystem has them). A gateway that cannot reach the mountpoints (a remote
// engine, a rootless gateway) gets sandboxes.ErrVolumesUnreachable. dst is removed again when the copy fails.
// Besides the bytes, a copy costs at most one engine call (creating dst, unless CreateVolume just made it): src's
// mountpoint is remembered from its creation or an earlier copy, and is looked up (in parallel) only the first time.
func (d *Driver) CopyVolume(ctx context.Context, src, dst string, labels map[string]string, limit int64) (sandboxes.CopyStats, error) {
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
