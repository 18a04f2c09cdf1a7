package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandgate/sandgate/sandboxes"
)

// Pause and resume. The driver freezes a container through its cgroup freezer itself (freezer.go) whenever the
// gateway can reach it, which is what makes a resume fit inside a request: a thaw is one write to a file the
// driver already knows, with no engine call at all. Where it cannot (a gateway off the engine host, not root, a
// host without a freezer) it falls back to the engine's pause and unpause. A container the engine itself paused
// (`docker pause` by an operator, or a gateway from before this driver) is unpaused through the engine, so
// Docker's own flag never stays set on a running container.

// Docker 20.10 records a container's paused flag twice: synchronously when pause or unpause returns, and again when
// containerd's paused/resumed event arrives. Under quick pause-unpause cycles an event can arrive late and flip the
// flag back, so the engine may refuse a pause as "already paused" (or an unpause as "not paused") for a moment
// while the container is in fact running (or frozen). Such a refusal is retried for staleAfter before it is
// believed.
const (
	staleAfter = 2 * time.Second
	staleRetry = 20 * time.Millisecond
)

// cgroupRoot is where the host mounts its cgroup hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// engineView is what one inspect tells about a container's freezing.
type engineView struct {
	running      bool
	enginePaused bool          // Docker's own paused flag (its pause, not ours)
	fz           cgroupFreezer // valid when fzErr is nil
	fzErr        error
}

// look inspects a running container and finds its freezer (remembering it). A missing container is
// sandboxes.ErrContainerNotFound.
func (d *Driver) look(ctx context.Context, containerID string) (engineView, error) {
	info, err := d.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return engineView{}, fmt.Errorf("%w: %v", sandboxes.ErrContainerNotFound, err)
		}
		return engineView{}, fmt.Errorf("inspecting container %s: %w", containerID, err)
	}
	return d.viewOf(containerID, info), nil
}

func (d *Driver) viewOf(containerID string, info container.InspectResponse) engineView {
	if info.State == nil || !info.State.Running || info.State.Pid <= 0 {
		return engineView{fzErr: errCgroupUnreachable}
	}
	v := engineView{running: true, enginePaused: info.State.Paused}
	cgs, err := readProcCgroup(info.State.Pid)
	if err != nil {
		v.fzErr = err
		return v
	}
	// The same cgroups locate the container's usage counters (usage_cgroup.go).
	if cs, err := statsPaths(cgroupRoot, cgs, info.ID); err == nil {
		d.stats.put(info.ID, cs)
	}
	if info.HostConfig != nil && !freezableRuntime(info.HostConfig.Runtime) {
		v.fzErr = fmt.Errorf("container %s runs under %s, which is paused through the engine: %w", containerID, info.HostConfig.Runtime, errCgroupUnreachable)
		return v
	}
	v.fz, v.fzErr = lookupFreezer(cgroupRoot, cgs, info.ID)
	// One the engine paused is not remembered: its unpause must go through the engine too, or Docker's flag would
	// stay set on a running container.
	if v.fzErr == nil && !v.enginePaused {
		d.freezers.put(containerID, v.fz)
		if info.ID != containerID {
			d.freezers.put(info.ID, v.fz)
		}
	}
	return v
}

// freezableRuntime says whether a container of runtime may be frozen through its cgroup from outside: only under
// runc. gVisor (runsc) runs the sandbox's processes on a kernel of its own whose host threads and stub processes
// talk through shared memory; frozen from outside mid-call, processes started right after the thaw died of SIGSEGV
// or SIGKILL (TestPauseFreezesResumeKeepsState/runsc). Through the engine (docker pause: runsc pause) gVisor stops
// the sandbox's tasks itself, and they resume intact.
func freezableRuntime(runtime string) bool {
	switch runtime {
	case "", "runc", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux":
		return true
	}
	return false
}

// Pause freezes every process of the container, through its cgroup freezer when the gateway reaches it, else
// through the engine (docker pause).
func (d *Driver) Pause(ctx context.Context, containerID string) error {
	return d.setFrozen(ctx, containerID, true)
}

// Unpause thaws a paused container; one that is not paused is left as it is. A container this driver froze is
// thawed with one write and no engine call.
func (d *Driver) Unpause(ctx context.Context, containerID string) error {
	return d.setFrozen(ctx, containerID, false)
}

// setFrozen freezes or thaws a container. A known freezer is written without an engine call; otherwise the
// engine's view decides: what the engine paused only the engine unpauses (its flag would stay set otherwise), and
// the engine pauses only where the gateway reaches no freezer.
func (d *Driver) setFrozen(ctx context.Context, containerID string, freeze bool) error {
	apply := func(fz cgroupFreezer) error {
		if freeze {
			return fz.freeze(ctx)
		}
		return fz.thaw()
	}
	if fz, ok := d.freezers.get(containerID); ok {
		err := apply(fz)
		if err == nil {
			return nil
		}
		d.freezers.forget(containerID)
		if !isGone(err) {
			return err
		}
	}
	v, err := d.look(ctx, containerID)
	switch {
	case err != nil:
		return err
	case !v.running:
		return fmt.Errorf("container %s is not running", containerID)
	case freeze && v.enginePaused:
		return nil
	case freeze && v.fzErr != nil:
		return retryStale(ctx, "already paused", func() error { return d.cli.ContainerPause(ctx, containerID) })
	case !freeze && v.enginePaused:
		return retryStale(ctx, "is not paused", func() error { return d.cli.ContainerUnpause(ctx, containerID) })
	case !freeze && v.fzErr != nil:
		return nil // not paused by the engine, and no freezer of ours to thaw
	}
	return apply(v.fz)
}

// thawBeforeStop thaws a container this driver froze before the engine stops or removes it: Docker does not know
// it is frozen, and on cgroup v1 a frozen process does not die of SIGKILL until it is thawed, so the stop would
// wait for its whole grace and then hang. The processes run again only to receive their signal. Only known
// freezers are looked at, without an engine call: a container is known once this driver froze it or listed it
// running (the Manager's reconcile lists every container at start, so one frozen by an earlier gateway is known).
func (d *Driver) thawBeforeStop(containerID string) {
	fz, ok := d.freezers.get(containerID)
	if !ok {
		return
	}
	if st, err := fz.state(); err == nil && st != stateThawed {
		_ = fz.thaw()
	}
}

// frozenHere reports whether a running container is frozen through its cgroup without the engine knowing (the
// engine's own pause sets its flag). info is the container's inspection when the caller has one; without it an
// unknown container is inspected once. A freezer that cannot be read counts as not frozen.
func (d *Driver) frozenHere(ctx context.Context, containerID string, info *container.InspectResponse) bool {
	fz, ok := d.freezers.get(containerID)
	if !ok {
		var v engineView
		if info != nil {
			v = d.viewOf(containerID, *info)
		} else {
			var err error
			if v, err = d.look(ctx, containerID); err != nil {
				return false
			}
		}
		if v.fzErr != nil {
			return false
		}
		fz = v.fz
	}
	st, err := fz.state()
	if err != nil {
		d.freezers.forget(containerID)
		return false
	}
	return st != stateThawed
}

// isGone says a freezer file vanished: the container stopped (its cgroup went with it) or was removed.
func isGone(err error) bool { return errors.Is(err, fs.ErrNotExist) }

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
