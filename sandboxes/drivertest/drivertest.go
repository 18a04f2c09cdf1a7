// Package drivertest is the driver conformance suite: one set of lifecycle tests, written against the
// sandboxes.Manager and its agent client, that every sandboxes.Driver must pass. A driver's package runs it from a
// test of its own (sandboxes/docker/conformance_test.go on the Docker engine; the Kubernetes driver on the test
// cluster) by filling an Env with what only that engine knows: how to make a driver, how to kill a container from
// outside, and how to see what the engine still holds.
//
// Everything else goes through the Manager and the agent, so both drivers run the same code. Waits are on
// observable state (events, Get, EnsureRunning, the engine's listing), bounded by testenv.WaitLimit.
package drivertest

import (
	"context"
	"os"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// Env is what a driver's test gives the suite.
type Env struct {
	// Image is the image of the base profile (our agent image, as the engine names it).
	Image string
	// Namespace returns a fresh Manager namespace for one subtest and registers with t the removal of everything
	// the engine may still hold of it when t ends, also after a failed test or a killed gateway.
	Namespace func(t *testing.T) string
	// Driver returns a new driver for namespace ns, as a starting gateway makes one. It is called again for a
	// restarted gateway (in this process or, for the kill -9 test, in a child process). The Manager closes it.
	Driver func(t *testing.T, ns string) sandboxes.Driver
	// Kill kills a running container of namespace ns from outside (the engine's own kill: its main process gets
	// SIGKILL), as an operator or a node's OOM killer would. containerID is as the driver's List reports it.
	Kill func(ctx context.Context, ns, containerID string) error
	// Leftovers lists what the engine still holds of namespace ns (containers, volumes, and whatever else the
	// driver makes per sandbox), found by the engine's own means rather than through the driver under test.
	// Per-namespace plumbing that outlives sandboxes by design (Docker's networks) is not listed.
	Leftovers func(ctx context.Context, ns string) ([]string, error)
	// ChildOOMReported says the engine reports a process of a sandbox that the kernel's OOM killer ended while the
	// container's main process lives on. Docker does (its oom event). Kubernetes does only where the kubelet makes
	// the whole container one OOM group (cgroup v2: the container then ends OOMKilled); on a cgroup v1 node nothing
	// in the API says so, and the suite checks instead that the sandbox survives the kill.
	ChildOOMReported bool
	// Runtime, when set, is the OCI runtime every profile of the suite runs under (runsc: the suite's second run on
	// the Docker engine, under gVisor).
	Runtime string
}

// Run runs every conformance subtest against env. When the test binary runs as the suite's child gateway (the
// kill -9 test starts one), Run plays that part instead and returns when the parent kills it: the caller's test
// must therefore do nothing before Run that a second process could not do as well (building an image that is
// already current is fine).
func Run(t *testing.T, env Env) {
	t.Helper()
	if env.Image == "" || env.Namespace == nil || env.Driver == nil || env.Kill == nil || env.Leftovers == nil {
		t.Fatalf("drivertest.Env is incomplete: every field is required (%+v)", env)
	}
	if spec := os.Getenv(childEnv); spec != "" {
		runChildGateway(t, env, spec)
		return
	}
	for _, st := range []struct {
		name string
		run  func(*testing.T, Env)
	}{
		{"create_ready", testCreateReady},
		{"exec", testExec},
		{"idle_stop_restart", testIdleStopRestart},
		{"ttl_expiry", testTTLExpiry},
		{"crash_reason", testCrashReason},
		{"warm_claim", testWarmClaim},
		{"kill9_adoption", testKill9Adoption},
		{"no_leaks_after_delete", testNoLeaks},
	} {
		t.Run(st.name, func(t *testing.T) { st.run(t, env) })
	}
}
