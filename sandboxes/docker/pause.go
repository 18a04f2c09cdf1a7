package docker

import (
	"context"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandgate/sandgate/sandboxes"
)

// Docker 20.10 records a container's paused flag twice: synchronously when pause or unpause returns, and again when
// containerd's paused/resumed event arrives. Under quick pause-unpause cycles an event can arrive late and flip the
// flag back, so the engine may refuse a pause as "already paused" (or an unpause as "not paused") for a moment
// while the container is in fact running (or frozen). Such a refusal is retried for staleAfter before it is
// believed.
const (
	staleAfter = 2 * time.Second
	staleRetry = 20 * time.Millisecond
)

// Pause freezes the container's processes with the cgroup freezer (docker pause).
func (d *Driver) Pause(ctx context.Context, containerID string) error {
	return retryStale(ctx, "already paused", func() error { return d.cli.ContainerPause(ctx, containerID) })
}

// Unpause thaws a paused container; one that is not paused is left as it is.
func (d *Driver) Unpause(ctx context.Context, containerID string) error {
	return retryStale(ctx, "is not paused", func() error { return d.cli.ContainerUnpause(ctx, containerID) })
}

// retryStale runs op until it succeeds, fails otherwise, or has been refused with the conflict naming done for
// staleAfter (then the refusal is true: the container already is where op would take it).
func retryStale(ctx context.Context, done string, op func() error) error {
	deadline := time.Now().Add(staleAfter)
	for {
		err := op()
		if err == nil || !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), done) {
			return err
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(staleRetry):
		}
	}
}

var _ sandboxes.PauseDriver = (*Driver)(nil)
