package docker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
	"github.com/sandgate/sandgate/sandboxes/drivertest"
)

// TestConformance runs the driver conformance suite on the real engine with our real base image. Its kill -9
// subtest runs this test again in a child process (drivertest.Run), so nothing here may do more than build the
// image, which is a no-op once it is current.
func TestConformance(t *testing.T) {
	runConformance(t, "")
}

// TestConformanceRunsc runs the same suite a second time with every profile under gVisor (`runtime runsc`): what a
// runc sandbox does, a gVisor one does too, through the same driver and the same base image. It skips, saying
// why, only where runsc cannot be registered (make test installs it: scripts/prereqs.sh runsc).
func TestConformanceRunsc(t *testing.T) {
	testenv.Runsc(t)
	runConformance(t, sandboxes.RuntimeGVisor)
}

func runConformance(t *testing.T, runtime string) {
	image := testenv.Image(t, "base")
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	drivertest.Run(t, drivertest.Env{
		Image:   image,
		Runtime: runtime,
		Namespace: func(t *testing.T) string {
			ns := testenv.Unique("sgc")
			testenv.RemoveNamespace(t, ns)
			return ns
		},
		Driver: func(t *testing.T, _ string) sandboxes.Driver {
			drv, err := docker.New("")
			if err != nil {
				t.Fatalf("docker driver: %v", err)
			}
			return drv
		},
		Kill: func(ctx context.Context, _, containerID string) error {
			return cli.ContainerKill(ctx, containerID, "KILL")
		},
		ChildOOMReported: true, // the engine's oom event
		Leftovers: func(ctx context.Context, ns string) ([]string, error) {
			f := filters.NewArgs(filters.Arg("label", ns+".managed"))
			cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
			if err != nil {
				return nil, fmt.Errorf("listing containers: %w", err)
			}
			vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
			if err != nil {
				return nil, fmt.Errorf("listing volumes: %w", err)
			}
			var left []string
			for _, c := range cs {
				left = append(left, fmt.Sprintf("container %v (%s)", c.Names, c.State))
			}
			for _, v := range vs.Volumes {
				left = append(left, "volume "+v.Name)
			}
			return left, nil
		},
	})
}
