package docker

import (
	"context"
	"fmt"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/sandboxes"
)

// CopyVolume creates the volume dst and copies every file of src into it, on the engine host's disk: the
// gateway reads and writes the local driver's mountpoints directly, so the copy costs what `cp -a` of the same
// bytes costs (and a reflink where the filesystem has them). A gateway that cannot reach the mountpoints (a remote
// engine, a rootless gateway) gets sandboxes.ErrVolumesUnreachable. dst is removed again when the copy fails.
func (d *Driver) CopyVolume(ctx context.Context, src, dst string, labels map[string]string, limit int64) (sandboxes.CopyStats, error) {
	sv, err := d.cli.VolumeInspect(ctx, src)
	if err != nil {
		return sandboxes.CopyStats{}, fmt.Errorf("inspecting volume %s: %w", src, err)
	}
	if err := reachable(sv); err != nil {
		return sandboxes.CopyStats{}, err
	}
	if _, err := d.cli.VolumeInspect(ctx, dst); err == nil {
		return sandboxes.CopyStats{}, fmt.Errorf("volume %s already exists", dst)
	} else if !cerrdefs.IsNotFound(err) {
		return sandboxes.CopyStats{}, fmt.Errorf("inspecting volume %s: %w", dst, err)
	}
	dv, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: dst, Driver: "local", Labels: labels})
	if err != nil {
		return sandboxes.CopyStats{}, fmt.Errorf("creating volume %s: %w", dst, err)
	}
	if err := reachable(dv); err != nil {
		_ = d.RemoveVolume(context.WithoutCancel(ctx), dst)
		return sandboxes.CopyStats{}, err
	}
	stats, err := copyTree(ctx, sv.Mountpoint, dv.Mountpoint, limit)
	if err != nil {
		_ = d.RemoveVolume(context.WithoutCancel(ctx), dst)
		return stats, fmt.Errorf("copying volume %s to %s: %w", src, dst, err)
	}
	return stats, nil
}

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
