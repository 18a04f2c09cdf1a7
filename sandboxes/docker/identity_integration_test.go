package docker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestShipUserOnTheEngine: a profile with Ship's user, HOME and host alias runs its container as uid 1000 with the
// name in a read-only passwd, the workspace's root its own, and `ship` resolving to the sandbox itself, both when
// made directly and when it joins a network spare (whose hosts file it takes; the engine refuses host entries
// beside a joined network); a sandbox of a profile without the options, on the same network, keeps the defaults.
func TestShipUserOnTheEngine(t *testing.T) {
	ship := smallProfile("ship", "")
	ship.User = &sandboxes.SandboxUser{Name: "shipyard", UID: 1000}
	ship.Home = "/workspace"
	ship.HostAliases = []string{"ship"}
	ship.NetworkSpares = 1
	plain := smallProfile("plain", "")
	plain.NetworkSpares = 1
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{ship, plain}, GCInterval: time.Hour})
	ctx := context.Background()
	network := h.mgr.InternalNetwork()

	check := func(id, want string) {
		t.Helper()
		got, err := h.exec(id, "sh", "-c", `echo "$(whoami) $(id -u):$(id -g) $HOME $(stat -c %U /workspace) $(getent hosts ship | cut -d' ' -f1)"`)
		if err != nil || strings.TrimSpace(got) != want {
			t.Fatalf("%s: %q (%v), want %q", id, got, err, want)
		}
		if out, err := h.exec(id, "sh", "-c", "echo x >> /etc/passwd"); err == nil {
			t.Fatalf("/etc/passwd is writable: %s", out)
		}
	}
	direct := h.create("ship")
	h.ready(direct.ID)
	if h.inspect(direct.ID).HostConfig.NetworkMode.IsContainer() {
		t.Fatal("the first create found a spare before any was made")
	}
	check(direct.ID, "shipyard 1000:1000 /workspace shipyard 127.0.0.1")
	h.waitFor("a spare for the ship profile", func() (bool, string) {
		n := h.drv.SpareHoldersFor(network, ship)
		return n == 1, fmt.Sprint(n)
	})
	joined := h.create("ship")
	h.ready(joined.ID)
	if !h.inspect(joined.ID).HostConfig.NetworkMode.IsContainer() {
		t.Fatal("the second create did not join the spare")
	}
	check(joined.ID, "shipyard 1000:1000 /workspace shipyard 127.0.0.1")

	// The plain profile never takes the ship profile's spare (its hosts file names ship).
	other := h.create("plain")
	h.ready(other.ID)
	got, err := h.exec(other.ID, "sh", "-c", `echo "$(whoami) $(id -u) $HOME $(stat -c %u /workspace) $(getent hosts ship || echo none)"`)
	if err != nil || strings.TrimSpace(got) != "sandbox 65532 /home/sandbox 65532 none" {
		t.Fatalf("the plain profile: %q %v", got, err)
	}
	for _, id := range []string{direct.ID, joined.ID, other.ID} {
		if err := h.mgr.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
