package main_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestImageRunsHardened starts our base image through the Docker Engine API with the hardened defaults of
// DESIGN.md, reaches the agent's /health, checks from inside that the hardening took, then removes the container
// and its workspace volume and checks that both are gone.
func TestImageRunsHardened(t *testing.T) {
	image := testenv.Image(t, "base")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	name := testenv.Unique("sg-hardened")
	vol, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: map[string]string{"sandgate.test": "1"}})
	if err != nil {
		t.Fatalf("creating volume: %v", err)
	}
	const mem = 256 << 20
	pids := int64(128)
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:  image,
		User:   "65532:65532",
		Env:    []string{agentapi.EnvToken + "=t0ken"},
		Labels: map[string]string{"sandgate.test": "1"},
	}, &container.HostConfig{
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		Init:           boolPtr(true),
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			"/tmp":          "rw,exec,nosuid,nodev,size=64m",
			"/home/sandbox": "rw,exec,nosuid,nodev,size=64m,uid=65532,gid=65532",
		},
		Mounts:     []mount.Mount{{Type: mount.TypeVolume, Source: vol.Name, Target: "/workspace"}},
		LogConfig:  container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "1"}},
		Resources:  container.Resources{Memory: mem, MemorySwap: mem, NanoCPUs: 500_000_000, PidsLimit: &pids},
		Privileged: false,
	}, nil, nil, name)
	if err != nil {
		t.Fatalf("creating container: %v", err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
			_ = cli.VolumeRemove(context.Background(), vol.Name, true)
		}
	})
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("starting container: %v", err)
	}
	info, err := cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, n := range info.NetworkSettings.Networks {
		ip = n.IPAddress
	}
	if err := testenv.WaitHTTP(ctx, fmt.Sprintf("http://%s:%d/health", ip, agentapi.DefaultPort), 30*time.Second); err != nil {
		t.Fatalf("agent health: %v", err)
	}

	hc := info.HostConfig
	if !hc.ReadonlyRootfs || hc.Memory != hc.MemorySwap || hc.Privileged || len(hc.Binds) != 0 || hc.Init == nil || !*hc.Init {
		t.Fatalf("hardening not applied: %+v", hc)
	}
	sb := &testenv.Sandbox{Name: name}
	if uid := strings.TrimSpace(sb.Exec(t, "id", "-u")); uid != "65532" {
		t.Errorf("runs as uid %s, want 65532", uid)
	}
	status := sb.Exec(t, "cat", "/proc/self/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q", want)
		}
	}
	if out, err := execIn(name, "touch", "/usr/local/bin/x"); err == nil {
		t.Errorf("root filesystem is writable: %s", out)
	}
	sb.Exec(t, "touch", "/workspace/kept", "/tmp/scratch")

	if err := cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatalf("removing container: %v", err)
	}
	if err := cli.VolumeRemove(ctx, vol.Name, true); err != nil {
		t.Fatalf("removing volume: %v", err)
	}
	removed = true
	if _, err := cli.ContainerInspect(ctx, created.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("container still there after removal: %v", err)
	}
	if _, err := cli.VolumeInspect(ctx, vol.Name); !cerrdefs.IsNotFound(err) {
		t.Errorf("volume still there after removal: %v", err)
	}
	resp, err := (&http.Client{Timeout: time.Second}).Get(fmt.Sprintf("http://%s:%d/health", ip, agentapi.DefaultPort))
	if err == nil {
		resp.Body.Close()
		t.Errorf("agent still answers after removal")
	}
}

func boolPtr(b bool) *bool { return &b }
