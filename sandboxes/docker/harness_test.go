package docker_test

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// harness is a real Manager on the real engine, in a namespace of its own, removed with everything it made.
type harness struct {
	t     *testing.T
	ns    string
	mgr   *sandboxes.Manager
	drv   *docker.Driver // the Manager's
	cli   *client.Client
	store string
	image string
	host  string // the engine endpoint the Manager's driver uses ("": DOCKER_HOST or the default socket)
	// hostResolvConf, when set, is the Manager's HostResolvConf (the host's resolvers as gVisor sandboxes see them).
	hostResolvConf string
}

func smallProfile(id, image string) sandboxes.Profile {
	return sandboxes.Profile{ID: id, Image: image,
		Resources:    sandboxes.Resources{CPUs: 0.5, Memory: "256m", Disk: "64m", Pids: 128},
		Capabilities: []string{sandboxes.CapShell, sandboxes.CapPython, sandboxes.CapFilesystem}}
}

func newHarness(t *testing.T, cfg sandboxes.Config) *harness {
	t.Helper()
	return newHarnessImage(t, cfg, testenv.Image(t, "base"))
}

// newHarnessImage is newHarness with image for the profiles that name none.
func newHarnessImage(t *testing.T, cfg sandboxes.Config, image string) *harness {
	t.Helper()
	return newHarnessOn(t, cfg, image, "")
}

// newHarnessOn is newHarnessImage with the Manager's driver on the engine endpoint host (the test's own checks
// still use the default engine).
func newHarnessOn(t *testing.T, cfg sandboxes.Config, image, host string) *harness {
	t.Helper()
	return newHarnessResolving(t, cfg, image, host, "")
}

// newHarnessResolving is newHarnessOn with the Manager reading the host's resolvers from hostResolvConf.
func newHarnessResolving(t *testing.T, cfg sandboxes.Config, image, host, hostResolvConf string) *harness {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ns: testenv.Unique("sgl"), cli: cli, store: filepath.Join(t.TempDir(), "store.db"), image: image, host: host,
		hostResolvConf: hostResolvConf}
	for i := range cfg.Profiles {
		if cfg.Profiles[i].Image == "" {
			cfg.Profiles[i].Image = image
		}
	}
	testenv.RemoveNamespace(t, h.ns)
	t.Cleanup(func() { cli.Close() })
	h.start(cfg)
	return h
}

// start makes (or remakes, after stop) the Manager on the same store.
func (h *harness) start(cfg sandboxes.Config) {
	h.t.Helper()
	drv, err := docker.New(h.host)
	if err != nil {
		h.t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{h.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: h.ns, HostResolvConf: h.hostResolvConf}, drv, sandboxes.NewBoltStore(h.store), logger)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := mgr.Apply(ctx, cfg); err != nil {
		h.t.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		h.t.Fatal(err)
	}
	h.mgr, h.drv = mgr, drv
	h.t.Cleanup(func() { mgr.Close() })
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// counts is how many containers and volumes of the namespace exist.
func (h *harness) counts() (containers, volumes int) {
	h.t.Helper()
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", h.ns+".managed"))
	list, err := h.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		h.t.Fatal(err)
	}
	vols, err := h.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(list), len(vols.Volumes)
}

func (h *harness) create(profile string) *sandboxes.Sandbox {
	h.t.Helper()
	sb, err := h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: profile, Owner: "tester"})
	if err != nil {
		h.t.Fatalf("create: %v", err)
	}
	return sb
}

func (h *harness) ready(id string) sandboxes.Target {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	tg, err := h.mgr.EnsureRunning(ctx, id)
	if err != nil {
		h.t.Fatalf("ensure running %s: %v", id, err)
	}
	return tg
}

func (h *harness) containerName(id string) string { return h.mgr.ContainerName(id) }

func (h *harness) exec(id string, argv ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"exec", h.containerName(id)}, argv...)...).CombinedOutput()
	return string(out), err
}

func (h *harness) inspect(id string) container.InspectResponse {
	h.t.Helper()
	info, err := h.cli.ContainerInspect(context.Background(), h.containerName(id))
	if err != nil {
		h.t.Fatalf("inspect %s: %v", id, err)
	}
	return info
}

func (h *harness) volumeExists(name string) bool {
	_, err := h.cli.VolumeInspect(context.Background(), name)
	return err == nil
}

func (h *harness) containerExists(id string) bool {
	_, err := h.cli.ContainerInspect(context.Background(), h.containerName(id))
	return err == nil
}

func (h *harness) waitEvent(ch <-chan sandboxes.Event, timeout time.Duration, match func(sandboxes.Event) bool) sandboxes.Event {
	h.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-ch:
			if match(ev) {
				return ev
			}
		case <-deadline:
			h.t.Fatalf("no matching event within %s", timeout)
			return sandboxes.Event{}
		}
	}
}

func networkInspectOptions() network.InspectOptions { return network.InspectOptions{} }

func execCommand(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
