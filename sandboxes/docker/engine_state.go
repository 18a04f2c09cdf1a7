package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/sandboxes"
)

// What the engine reports about the containers and volumes the Manager made: one container's state, the lists the
// reconcile and the orphan sweep read, and the event stream deaths are noticed from.

// Inspect reports a container's state. Paused is true for a container frozen by the engine's pause or through
// its cgroup by this driver (pause.go), which the engine itself reports as running.
func (d *Driver) Inspect(ctx context.Context, containerID string) (sandboxes.ContainerState, error) {
	info, err := d.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandboxes.ContainerState{}, fmt.Errorf("%w: %s", sandboxes.ErrContainerNotFound, containerID)
		}
		return sandboxes.ContainerState{}, err
	}
	st := sandboxes.ContainerState{ID: info.ID, Name: strings.TrimPrefix(info.Name, "/")}
	if info.Config != nil {
		st.Labels = info.Config.Labels
	}
	st.Created, _ = time.Parse(time.RFC3339Nano, info.Created)
	if s := info.State; s != nil {
		st.Running = s.Running
		st.Paused = s.Paused || (s.Running && d.frozenHere(ctx, info.ID, &info))
		st.ExitCode = s.ExitCode
		st.OOMKilled = s.OOMKilled
		st.Error = s.Error
		st.FinishedAt, _ = time.Parse(time.RFC3339Nano, s.FinishedAt)
	}
	return st, nil
}

func labelFilters(match map[string]string) filters.Args {
	args := filters.NewArgs()
	for k, v := range match {
		if v == "" {
			args.Add("label", k)
		} else {
			args.Add("label", k+"="+v)
		}
	}
	return args
}

// List returns every container (running or not) carrying the labels; stopped ones are inspected for their exit.
// A container frozen through its cgroup is reported paused, not running, like one the engine paused.
func (d *Driver) List(ctx context.Context, match map[string]string) ([]sandboxes.ContainerState, error) {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: labelFilters(match)})
	if err != nil {
		return nil, err
	}
	out := make([]sandboxes.ContainerState, 0, len(list))
	for _, c := range list {
		st := sandboxes.ContainerState{ID: c.ID, Labels: c.Labels, Created: time.Unix(c.Created, 0), Running: c.State == container.StateRunning,
			Paused: c.State == container.StatePaused}
		if len(c.Names) > 0 {
			st.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		if nm := container.NetworkMode(c.HostConfig.NetworkMode); nm.IsContainer() {
			st.JoinedTo = nm.ConnectedContainer()
		}
		if st.Running && d.frozenHere(ctx, c.ID, nil) {
			st.Running, st.Paused = false, true
		}
		if !st.Running {
			if full, err := d.Inspect(ctx, c.ID); err == nil {
				st.ExitCode, st.OOMKilled, st.FinishedAt, st.Error = full.ExitCode, full.OOMKilled, full.FinishedAt, full.Error
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// ListVolumes returns the volumes carrying the labels.
func (d *Driver) ListVolumes(ctx context.Context, match map[string]string) ([]sandboxes.VolumeInfo, error) {
	resp, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: labelFilters(match)})
	if err != nil {
		return nil, err
	}
	out := make([]sandboxes.VolumeInfo, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		created, _ := time.Parse(time.RFC3339, v.CreatedAt)
		out = append(out, sandboxes.VolumeInfo{Name: v.Name, Labels: v.Labels, Created: created})
	}
	return out, nil
}

// Events streams die, oom and destroy events of containers labelled key=value.
func (d *Driver) Events(ctx context.Context, key, value string) (<-chan sandboxes.ContainerEvent, <-chan error) {
	args := filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", key+"="+value),
		filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", string(events.ActionOOM)),
		filters.Arg("event", string(events.ActionDestroy)),
	)
	msgs, errs := d.cli.Events(ctx, events.ListOptions{Filters: args})
	out := make(chan sandboxes.ContainerEvent, 64)
	outErr := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-errs:
				if err == nil {
					err = errors.New("event stream closed")
				}
				outErr <- err
				return
			case msg := <-msgs:
				ev := sandboxes.ContainerEvent{ContainerID: msg.Actor.ID, Action: string(msg.Action), Labels: msg.Actor.Attributes, ExitCode: -1}
				if msg.TimeNano != 0 {
					ev.At = time.Unix(0, msg.TimeNano)
				} else {
					ev.At = time.Now()
				}
				if c, err := strconv.Atoi(msg.Actor.Attributes["exitCode"]); err == nil {
					ev.ExitCode = c
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, outErr
}
