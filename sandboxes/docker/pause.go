package docker

import (
	"context"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandgate/sandgate/sandboxes"
)

// Pause freezes the container's processes with the cgroup freezer (docker pause).
func (d *Driver) Pause(ctx context.Context, containerID string) error {
	err := d.cli.ContainerPause(ctx, containerID)
	if err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already paused") {
		return nil
	}
	return err
}

// Unpause thaws a paused container; one that is not paused is left as it is.
func (d *Driver) Unpause(ctx context.Context, containerID string) error {
	err := d.cli.ContainerUnpause(ctx, containerID)
	if err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "is not paused") {
		return nil
	}
	return err
}

var _ sandboxes.PauseDriver = (*Driver)(nil)
