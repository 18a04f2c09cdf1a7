package testenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	docker "github.com/docker/docker/client"
	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/sandboxes"
)

// RemoveNamespace registers a cleanup that removes every container, volume and network the lifecycle Manager
// labelled as managed in namespace ns, even if the gateway or Manager under test crashed. A gateway may still be
// tearing containers down when the test ends, so removal is retried until nothing is left; what is still there
// after a minute fails the test.
func RemoveNamespace(t testing.TB, ns string) {
	t.Helper()
	t.Cleanup(func() {
		cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
		if err != nil {
			t.Errorf("cleanup of namespace %s: %v", ns, err)
			return
		}
		defer cli.Close()
		if left := removeNamespace(cli, ns, time.Minute); left != "" {
			t.Errorf("cleanup of namespace %s left %s", ns, left)
		}
	})
}

// removeNamespace removes the namespace's containers, volumes and networks, retrying until they are gone or the
// timeout passes; it reports what is left.
func removeNamespace(cli *docker.Client, ns string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", ns+".managed"))
	for {
		left := 0
		list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		for _, c := range list {
			if cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}) != nil {
				left++
			}
		}
		vols, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
		for _, v := range vols.Volumes {
			if cli.VolumeRemove(ctx, v.Name, true) != nil {
				left++
				continue
			}
			if msg := removeWorkspaceImage(v.Name); msg != "" {
				return msg
			}
		}
		nets, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
		for _, n := range nets {
			if cli.NetworkRemove(ctx, n.ID) != nil {
				left++
			}
		}
		if left == 0 {
			return removeSocketDirs(ns)
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("%d containers, volumes or networks", left)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// removeWorkspaceImage detaches the loop device and removes the image of a capped workspace volume the test's
// gateway made in the Docker driver's default image directory (sandboxes/docker workspace_cap.go): the engine's
// removal of the volume leaves them. It reports what is left.
func removeWorkspaceImage(volume string) string {
	if strings.ContainsAny(volume, "/") || volume == "" {
		return ""
	}
	img := filepath.Join("/var/lib/sandgate/workspaces", volume+".img")
	if _, err := os.Stat(img); err != nil {
		return ""
	}
	out, _ := exec.Command("losetup", "-j", img).Output()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if dev, _, ok := strings.Cut(line, ":"); ok {
			if msg, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
				return fmt.Sprintf("loop device %s of %s: %s %v", dev, img, msg, err)
			}
		}
	}
	_ = os.Remove(filepath.Join("/run/sandgate/workspaces", volume))
	if err := os.Remove(img); err != nil {
		return fmt.Sprintf("workspace image %s: %v", img, err)
	}
	return ""
}

// removeSocketDirs unmounts and removes what network-none sandboxes of ns left in the Manager's default socket
// directory (/run/sandgate/<ns>, one tmpfs per sandbox): a gateway keeps them for sandboxes that outlive it, so
// a test that abandons its namespace must take them itself. It reports what is left.
func removeSocketDirs(ns string) string {
	if strings.ContainsAny(ns, "/.") || ns == "" {
		return ""
	}
	root := filepath.Join(sandboxes.SocketMountPoint, ns)
	dirs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	for _, d := range dirs {
		// MNT_DETACH: a socket still held open by a dying agent must not keep the directory.
		if err := unix.Unmount(filepath.Join(root, d.Name()), unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Sprintf("socket directory %s: %v", d.Name(), err)
		}
	}
	if err := os.RemoveAll(root); err != nil {
		return fmt.Sprintf("socket directories: %v", err)
	}
	return ""
}

// ContainerOf returns the running container of the lifecycle Manager's sandbox id in namespace ns, found by the
// id label the Manager puts on it.
func ContainerOf(t testing.TB, ns, id string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label="+ns+".id="+id).Output()
	name := strings.TrimSpace(string(out))
	if err != nil || name == "" || strings.Contains(name, "\n") {
		t.Fatalf("container of %s: %q %v", id, name, err)
	}
	return name
}

// Inspect is the engine's view of a container a test made (its limits, image, command), through the Go client.
func Inspect(t testing.TB, name string) container.InspectResponse {
	t.Helper()
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	defer cli.Close()
	info, err := cli.ContainerInspect(context.Background(), name)
	if err != nil {
		t.Fatalf("inspecting container %s: %v", name, err)
	}
	return info
}
