package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// Any image (sandboxes/profile_image.go): our static agent reaches a container of another image through a
// read-only named volume holding only the agent binary, filled from the agent image by the engine itself (a copy
// between two created, never started, containers), so it works with an engine on another host: the gateway's own
// filesystem is never involved. Docker's `image` mount type would do the same without the volume, but it needs
// Engine API 1.48 (Docker 28) and the engines we run on speak 1.41 (Docker 20.10); the volume works on both.

// agentSourcePath is where our images carry the agent.
const agentSourcePath = "/usr/local/bin/" + sandboxes.AgentBinaryName

// fillLabel marks the helper containers the agent volume's fill and ownMounts create and never start.
const fillLabel = "sandgate.agent_fill"

// fillStaleAfter is how old a helper container must be before a starting gateway removes it as left behind by a
// gateway that died mid-fill (a live fill takes seconds).
const fillStaleAfter = 10 * time.Minute

// sweepFillContainers removes helper containers left behind by a gateway that died while it used them.
func (d *Driver) sweepFillContainers(ctx context.Context) error {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", fillLabel+"=true"))})
	if err != nil {
		return fmt.Errorf("listing agent fill containers: %w", err)
	}
	for _, c := range list {
		if time.Since(time.Unix(c.Created, 0)) < fillStaleAfter || c.State == "running" {
			continue
		}
		if err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("removing agent fill container %s: %w", c.ID, err)
		}
	}
	return nil
}

// agentFillPoint is where the filling container mounts the volume; nothing ever runs there.
const agentFillPoint = "/sandgate-agent-volume"

// injectAgent shapes cfg and hc so the container runs the agent from its read-only volume, supervising the
// image's own entrypoint and cmd (or the profile's overrides).
func (d *Driver) injectAgent(ctx context.Context, spec sandboxes.ContainerSpec, cfg *container.Config, hc *container.HostConfig) error {
	vol, err := d.ensureAgentVolume(ctx, spec.AgentImage, spec.AgentVolumePrefix, spec.AgentVolumeLabels)
	if err != nil {
		return err
	}
	img, err := d.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		return fmt.Errorf("inspecting image %s for its entrypoint: %w", spec.Image, err)
	}
	var entry, cmd []string
	if img.Config != nil {
		entry, cmd = img.Config.Entrypoint, img.Config.Cmd
	}
	argv := sandboxes.ChildArgv(spec.Profile, entry, cmd)
	if len(argv) > 0 && path.Base(argv[0]) == sandboxes.AgentBinaryName {
		argv = nil // one of our images: its entrypoint is the agent the volume already runs
	}
	cfg.Entrypoint = append([]string{path.Join(sandboxes.AgentMountPoint, sandboxes.AgentBinaryName), agentapi.ArgSupervise, "--"}, argv...)
	cfg.Cmd = nil // Docker keeps no image CMD once the entrypoint is set (the image's HEALTHCHECK is off for every sandbox: noHealthcheck)
	hc.Mounts = append(hc.Mounts, mount.Mount{
		Type: mount.TypeVolume, Source: vol, Target: sandboxes.AgentMountPoint, ReadOnly: true,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true},
	})
	// HOME is the profile's sized tmpfs, as in our images (issue 33: an engine volume there had no size). What the
	// image put in HOME (FastGPT's image starts /home/sandbox/entrypoint.sh) is seeded: a volume mounted read-only
	// at agentapi.HomeSeedDir (so the tenant cannot grow it), which ownMounts has the engine fill from the image's
	// HOME and Remove removes with the container; the agent copies it into HOME at each start, before the
	// entrypoint runs (entrypoint.SeedHome). The engine refuses a read-only anonymous volume, so it is named.
	seed := homeSeedVolume(spec.Name)
	// The Manager's labels (spec.HomeSeedLabels) say whose it is, so its orphan sweep collects one whose container
	// never came (a gateway that died between the two creates) or is gone; not its workspace labels, which would
	// make it count as a workspace.
	labels := map[string]string{homeSeedLabel: "true"}
	for k, v := range spec.HomeSeedLabels {
		labels[k] = v
	}
	if _, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: seed, Driver: "local", Labels: labels}); err != nil {
		return fmt.Errorf("creating the volume of the image's HOME: %w", err)
	}
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Source: seed, Target: agentapi.HomeSeedDir, ReadOnly: true,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
	return nil
}

// homeSeedLabel marks the volumes holding an injected image's HOME (one per container, removed with it).
const homeSeedLabel = "sandgate.home_seed"

// homeSeedVolume names the HOME seed volume of the container named name.
func homeSeedVolume(name string) string {
	if name == "" { // the Manager always names its containers; a bare driver call may not
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		name = "sandgate-" + hex.EncodeToString(b)
	}
	return name + "-home-seed"
}

// homeSeedOf is the HOME seed volume a container mounts, "" for none.
func homeSeedOf(mounts []container.MountPoint) string {
	for _, m := range mounts {
		if m.Destination == agentapi.HomeSeedDir && m.Type == mount.TypeVolume {
			return m.Name
		}
	}
	return ""
}

// removeHomeSeed removes a container's HOME seed volume once the container is gone; one still in use (a
// concurrent remove has not finished) is left for that remove.
func (d *Driver) removeHomeSeed(ctx context.Context, name string) error {
	if err := d.cli.VolumeRemove(ctx, name, false); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("removing the volume of the image's HOME %s: %w", name, err)
	}
	return nil
}

// fillHomeSeed has the engine copy the image's HOME into the new container's seed volume: a helper container of
// the sandbox's image, created and never started, mounts the empty volume at HOME, and the engine fills a volume
// from the image when a container that mounts it is created. An image without HOME leaves it empty.
func (d *Driver) fillHomeSeed(ctx context.Context, seedVol string, spec sandboxes.ContainerSpec) error {
	hc := &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
		{Type: mount.TypeVolume, Source: seedVol, Target: sandboxes.SandboxHome},
	}}
	helper, err := d.cli.ContainerCreate(ctx, &container.Config{Image: spec.Image,
		Entrypoint: []string{path.Join(sandboxes.AgentMountPoint, sandboxes.AgentBinaryName)}, Labels: map[string]string{fillLabel: "true"}},
		hc, nil, nil, "")
	if err != nil {
		return fmt.Errorf("creating the container that copies the image's HOME: %w", err)
	}
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := d.cli.ContainerRemove(rmCtx, helper.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("removing the container that copied the image's HOME: %w", err)
	}
	return nil
}

// ownMounts fills the HOME seed volume of a created, not yet started, injected container (fillHomeSeed) and gives
// the sandbox user the roots of its workspace volume and of that seed: another image has no /workspace owned by
// 65532 for the engine to copy (ours has), and its HOME, if any, belongs to its own user. A tar holding just those
// two directory entries, extracted at / of a helper container that mounts both volumes, sets their owner and mode;
// files inside keep theirs.
func (d *Driver) ownMounts(ctx context.Context, containerID string, spec sandboxes.ContainerSpec) error {
	info, err := d.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		return fmt.Errorf("inspecting the new container: %w", err)
	}
	homeVol := homeSeedOf(info.Mounts)
	if homeVol == "" {
		return fmt.Errorf("the new container has no volume at %s", agentapi.HomeSeedDir)
	}
	if err := d.fillHomeSeed(ctx, homeVol, spec); err != nil {
		return err
	}
	hc := &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
		{Type: mount.TypeVolume, Source: spec.Volume, Target: "/workspace", VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
		{Type: mount.TypeVolume, Source: homeVol, Target: sandboxes.SandboxHome, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
	}}
	helper, remove, err := d.createHelper(ctx, spec.AgentImage, hc)
	if err != nil {
		return fmt.Errorf("creating the helper container: %w", err)
	}
	defer remove()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	uid, gid := sandboxUID, sandboxUID
	for _, dir := range []struct {
		name string
		mode int64
	}{{"workspace", 0o755}, {strings.TrimPrefix(sandboxes.SandboxHome, "/"), 0o700}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir.name + "/", Mode: dir.mode, Uid: uid, Gid: gid,
			ModTime: time.Now()}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	// Without CopyUIDGID the engine applies the archive's own owners; with it, it would look the helper's USER
	// up in the engine host's passwd database instead.
	if err := d.cli.CopyToContainer(ctx, helper, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("handing the workspace and HOME to the sandbox user: %w", err)
	}
	return nil
}

// sandboxUID is SandboxUser's uid (and gid).
const sandboxUID = 65532

// AgentVolume is the name of the read-only volume carrying the agent of image id imageID.
func AgentVolume(prefix, imageID string) string {
	id := strings.TrimPrefix(imageID, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return prefix + id
}

// ensureAgentVolume returns the volume holding the agent of agentImage, filling it the first time this driver
// needs it. Filling again is harmless (the engine replaces the file; running agents keep their inode), so a volume
// left half filled by a gateway that died is repaired by the next one.
func (d *Driver) ensureAgentVolume(ctx context.Context, agentImage, prefix string, labels map[string]string) (string, error) {
	img, err := d.cli.ImageInspect(ctx, agentImage)
	if err != nil {
		return "", fmt.Errorf("inspecting the agent image %s: %w", agentImage, err)
	}
	vol := AgentVolume(prefix, img.ID)
	d.agentMu.Lock()
	defer d.agentMu.Unlock()
	if d.agentVolumes[vol] {
		return vol, nil
	}
	all := map[string]string{"sandgate.agent_image": img.ID}
	for k, v := range labels {
		all[k] = v
	}
	if err := d.CreateVolume(ctx, vol, all); err != nil {
		return "", fmt.Errorf("creating the agent volume %s: %w", vol, err)
	}
	if err := d.fillAgentVolume(ctx, img.ID, vol); err != nil {
		return "", fmt.Errorf("filling the agent volume %s from %s: %w", vol, agentImage, err)
	}
	if d.agentVolumes == nil {
		d.agentVolumes = map[string]bool{}
	}
	d.agentVolumes[vol] = true
	return vol, nil
}

// createHelper creates, and never starts, a helper container of image with hc, labelled fillLabel so a sweep finds
// one a crash left behind; remove force-removes it on a context of its own (30s), so a cancelled request still
// cleans up.
func (d *Driver) createHelper(ctx context.Context, image string, hc *container.HostConfig) (id string, remove func(), err error) {
	created, err := d.cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: []string{agentSourcePath},
		Labels: map[string]string{fillLabel: "true"}}, hc, nil, nil, "")
	if err != nil {
		return "", nil, err
	}
	return created.ID, func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = d.cli.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true})
	}, nil
}

// fillAgentVolume copies the agent binary from the image into the volume through two created containers: the
// engine holds a container's lock while it streams an archive out of it, so reading and writing through one
// container would wait on itself.
func (d *Driver) fillAgentVolume(ctx context.Context, imageID, vol string) error {
	none := &container.HostConfig{NetworkMode: "none"}
	src, removeSrc, err := d.createHelper(ctx, imageID, none)
	if err != nil {
		return fmt.Errorf("creating the source container: %w", err)
	}
	defer removeSrc()
	dstHC := *none
	dstHC.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: agentFillPoint, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}
	dst, removeDst, err := d.createHelper(ctx, imageID, &dstHC)
	if err != nil {
		return fmt.Errorf("creating the filling container: %w", err)
	}
	defer removeDst()
	rc, _, err := d.cli.CopyFromContainer(ctx, src, agentSourcePath)
	if err != nil {
		return fmt.Errorf("reading %s from the agent image: %w", agentSourcePath, err)
	}
	defer rc.Close()
	if err := d.cli.CopyToContainer(ctx, dst, agentFillPoint, rc, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("writing the agent into the volume: %w", err)
	}
	return nil
}

// ImagePresent tells a create at once whether the engine holds a caller-chosen image: nothing is ever pulled, so
// an absent one is the caller's CodeImageNotFound, not a start that fails later.
func (d *Driver) ImagePresent(ctx context.Context, image string) error {
	_, err := d.cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		return &sandboxes.Error{Code: sandboxes.CodeImageNotFound,
			Message: fmt.Sprintf("image %q is not on this gateway's engine, and sandgate never pulls: the operator loads or builds it first", image),
			Details: map[string]any{"image": image}}
	default:
		return &sandboxes.Error{Code: sandboxes.CodeEngine, Message: fmt.Sprintf("inspecting image %s", image), Err: err}
	}
}

var _ sandboxes.ImageChecker = (*Driver)(nil)
