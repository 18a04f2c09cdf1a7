package docker_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// TestNetworkSparesServeColdCreates: with network_spares 1 the first cold create makes its own network and leaves a
// spare holder behind; the next joins that holder's namespace (address, hostname and resolver setting as a sandbox
// made directly has them), keeps it through a stop, an engine-side stop of the holder and a start, and removes it
// when deleted. The orphan sweep keeps a joined holder and removes a spare nothing joined; a sweep that took a spare
// the driver still counts costs the next create nothing but the set-up; a sandbox whose holder was removed while it
// was stopped starts again in a new container on its workspace; Close removes the spares.
func TestNetworkSparesServeColdCreates(t *testing.T) {
	p := smallProfile("spare", "")
	p.NetworkSpares = 1
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour, OrphanMinAge: time.Nanosecond}
	h := newHarness(t, cfg)
	ctx := context.Background()
	network := h.mgr.InternalNetwork()
	spares := func(n int) func() (bool, string) {
		return func() (bool, string) { got := h.drv.SpareHolders(network); return got == n, fmt.Sprint(got) }
	}

	direct := h.create("spare")
	h.ready(direct.ID)
	if mode := h.inspect(direct.ID).HostConfig.NetworkMode; mode.IsContainer() {
		t.Fatalf("the first create found a spare before any was made: %s", mode)
	}
	h.waitFor("a spare holder after the first start", spares(1))

	joined := h.create("spare")
	tg := h.ready(joined.ID)
	mode := h.inspect(joined.ID).HostConfig.NetworkMode
	if !mode.IsContainer() {
		t.Fatalf("the second create did not join the spare: network mode %s", mode)
	}
	holder := mode.ConnectedContainer()
	hinfo, err := h.cli.ContainerInspect(ctx, holder)
	if err != nil || hinfo.Config.Labels[h.ns+".holder"] != network {
		t.Fatalf("holder %s: %v %v", holder, err, hinfo.Config)
	}
	if ep := hinfo.NetworkSettings.Networks[network]; ep == nil || !strings.HasPrefix(tg.Addr, ep.IPAddress+":") {
		t.Fatalf("the sandbox's address %s is not its holder's on %s", tg.Addr, network)
	}
	for _, file := range []string{"/etc/resolv.conf", "/etc/hostname"} {
		want, err1 := h.exec(direct.ID, "cat", file)
		got, err2 := h.exec(joined.ID, "cat", file)
		if err1 != nil || err2 != nil || got != want {
			t.Fatalf("%s: joined %q (%v), made directly %q (%v)", file, got, err2, want, err1)
		}
	}
	if out, err := h.exec(joined.ID, "python3", "-c", "import socket; print(socket.gethostname())"); err != nil || strings.TrimSpace(out) != "sandbox" {
		t.Fatalf("hostname inside: %q %v", out, err)
	}
	h.waitFor("the spare refilled after the join", spares(1))

	// Stopped, its holder stopped too behind the gateway's back (as an engine restart does), and started again.
	if err := h.mgr.Stop(ctx, joined.ID); err != nil {
		t.Fatal(err)
	}
	if out, err := execCommand("docker", "stop", "-t", "1", holder); err != nil {
		t.Fatalf("docker stop %s: %v %s", holder, err, out)
	}
	tg = h.ready(joined.ID)
	if got := h.inspect(joined.ID).HostConfig.NetworkMode.ConnectedContainer(); got != holder {
		t.Fatalf("after the restart the sandbox joined %q, want its holder %s", got, holder)
	}
	if c, err := net.DialTimeout("tcp", tg.Addr, 5*time.Second); err != nil {
		t.Fatalf("the agent after the restart at %s: %v", tg.Addr, err)
	} else {
		c.Close()
	}

	// The sweep: the joined holder stays, the spare (older than the minimum age, joined by nothing) goes.
	if rep := h.mgr.SweepOrphans(ctx); rep.OrphanContainers != 1 || rep.Errors != 0 {
		t.Fatalf("sweep with one spare and one joined holder: %+v", rep)
	}
	if _, err := h.cli.ContainerInspect(ctx, holder); err != nil {
		t.Fatalf("the sweep removed a joined holder: %v", err)
	}
	after := h.create("spare") // the driver's spare is gone: made directly, not a failure
	h.ready(after.ID)
	if mode := h.inspect(after.ID).HostConfig.NetworkMode; mode.IsContainer() {
		t.Fatalf("joined %s, which the sweep removed", mode)
	}

	// Its holder removed behind the gateway's back while it is stopped: the container can never start again, so the
	// driver removes it, and the Manager rebuilds the sandbox on the same workspace as after any removed container
	// (the request that found it answers session_not_ready, a later one the rebuilt sandbox).
	if _, err := h.exec(joined.ID, "sh", "-c", "echo kept > /workspace/mark"); err != nil {
		t.Fatal(err)
	}
	if err := h.mgr.Stop(ctx, joined.ID); err != nil {
		t.Fatal(err)
	}
	if out, err := execCommand("docker", "rm", "-f", holder); err != nil {
		t.Fatalf("docker rm %s: %v %s", holder, err, out)
	}
	h.waitFor("the sandbox rebuilt on its workspace", func() (bool, string) {
		rctx, cancel := context.WithTimeout(ctx, testenv.WaitLimit)
		defer cancel()
		_, err := h.mgr.EnsureRunning(rctx, joined.ID)
		return err == nil, fmt.Sprint(err)
	})
	if out, err := h.exec(joined.ID, "cat", "/workspace/mark"); err != nil || strings.TrimSpace(out) != "kept" {
		t.Fatalf("the workspace after its holder was removed: %q %v", out, err)
	}
	holder = h.inspect(joined.ID).HostConfig.NetworkMode.ConnectedContainer() // a new spare's, or none

	for _, id := range []string{direct.ID, joined.ID, after.ID} {
		if err := h.mgr.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.cli.ContainerInspect(ctx, holder); holder != "" && err == nil {
		t.Fatal("the holder outlived its sandbox")
	}
	h.waitFor("the spare made after the last start", spares(1))
	if err := h.mgr.Close(); err != nil {
		t.Fatal(err)
	}
	h.waitFor("nothing of the namespace left after Close", func() (bool, string) {
		c, v := h.counts()
		return c == 0 && v == 0, fmt.Sprintf("%d containers, %d volumes", c, v)
	})
}
