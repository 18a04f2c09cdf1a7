package drivertest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// testWarmClaim: with warm_pool 1 a create claims the ready member: it answers ready with a target that works at
// once, on a workspace of its own, and the pool refills with another container.
func testWarmClaim(t *testing.T, env Env) {
	p := baseProfile("warm", env.Image)
	p.WarmPoolSize = 1
	g := newGateway(t, env, sandboxes.Config{Profiles: []sandboxes.Profile{p}})
	warmReady := func() (bool, string) {
		return g.mgr.WarmReady() >= 1, fmt.Sprintf("stats %v", g.mgr.Stats())
	}
	g.waitFor("the warm pool fills", warmReady)

	sb := g.create(sandboxes.CreateRequest{Profile: "warm"})
	if sb.LaunchType != sandboxes.LaunchWarm || sb.Status != sandboxes.StatusReady {
		t.Fatalf("a create with a ready warm member: %+v", sb)
	}
	// Ready at once: the Manager resolves it without waiting, and its agent answers there.
	tg, ok := g.mgr.Resolve(sb.ID)
	if !ok {
		t.Fatal("a claimed warm sandbox does not resolve")
	}
	if got := g.output(tg, "echo claimed > /workspace/file.txt && cat /workspace/file.txt"); got != "claimed" {
		t.Fatalf("exec in the claimed sandbox: %q", got)
	}
	// The member was made ahead under the profile's runtime: under gVisor the claimed sandbox reads its kernel.
	if env.Runtime == sandboxes.RuntimeGVisor {
		if got := g.output(tg, "uname -r"); !strings.Contains(got, "gvisor") {
			t.Fatalf("a warm member claimed under runtime %s reads kernel release %q, want gVisor's", env.Runtime, got)
		}
	}
	claimed := g.runningContainer(sb.ID)
	if vs := g.volumes(sb.WorkspaceID); len(vs) != 1 {
		t.Fatalf("the claimed sandbox's workspace: %+v", vs)
	}

	g.waitFor("the warm pool refills", warmReady)
	all, err := g.drv.List(context.Background(), map[string]string{g.label("managed"): "true"})
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, c := range all {
		if c.ID != claimed.ID && c.Running {
			others++
		}
	}
	if others != 1 {
		t.Fatalf("after the refill %d other running containers, want the one new member: %+v", others, all)
	}
	// The claimed sandbox is an ordinary one now: a delete removes it and leaves the pool alone.
	if err := g.mgr.Delete(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if g.mgr.WarmReady() != 1 {
		t.Fatalf("deleting a claimed sandbox changed the pool: %v", g.mgr.Stats())
	}
}
