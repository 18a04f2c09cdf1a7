package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// TestFullNetworkAnswersQuotaExceeded fills the sandboxes' own network to the kernel's limit and starts one more:
// the start answers quota_exceeded (scope network) instead of an engine error, leaves no container behind, keeps
// the sandbox and its workspace, and succeeds once a port is free again.
func TestFullNetworkAnswersQuotaExceeded(t *testing.T) {
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{smallProfile("small", "")}, GCInterval: time.Hour})
	first := h.create("small")
	h.ready(first.ID) // the network exists, and its first port is this sandbox's
	nw, err := h.cli.NetworkInspect(context.Background(), h.mgr.InternalNetwork(), networkInspectOptions())
	if err != nil {
		t.Fatal(err)
	}
	bridge := nw.Options["com.docker.network.bridge.name"]
	if bridge == "" {
		t.Fatalf("network %s names no bridge: %v", nw.Name, nw.Options)
	}
	ports := fillBridge(t, bridge)
	t.Logf("bridge %s took %d more ports beside the sandbox's", bridge, len(ports))
	if len(ports) != docker.MaxBridgePorts-1 {
		t.Fatalf("the bridge took %d ports beside the sandbox's, want %d (MaxBridgePorts is the kernel's limit)", len(ports), docker.MaxBridgePorts-1)
	}

	second := h.create("small")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	_, err = h.mgr.EnsureRunning(ctx, second.ID)
	var se *sandboxes.Error
	if !errors.As(err, &se) || se.Code != sandboxes.CodeQuotaExceeded || se.Details["scope"] != "network" ||
		se.Details["network"] != h.mgr.InternalNetwork() || se.Details["limit"] != docker.MaxBridgePorts {
		t.Fatalf("start on a full network: %v (%#v), want quota_exceeded with scope network", err, se)
	}
	if h.containerExists(second.ID) {
		t.Fatal("the refused start left its container behind")
	}
	if !h.volumeExists(h.mgr.VolumeName(second.WorkspaceID)) {
		t.Fatal("the refused start lost the sandbox's workspace")
	}
	if sb, err := h.mgr.Get(context.Background(), second.ID); err != nil || sb.Status != sandboxes.StatusFailed ||
		!strings.Contains(sb.LastError, "is full") {
		t.Fatalf("the refused sandbox: %+v (%v)", sb, err)
	}

	if out, err := exec.Command("ip", "link", "del", ports[0]).CombinedOutput(); err != nil {
		t.Fatalf("freeing a port: %v %s", err, out)
	}
	h.ready(second.ID)
	if out, err := h.exec(second.ID, "true"); err != nil {
		t.Fatalf("the sandbox started once a port was free: %v %s", err, out)
	}
}

// fillBridge plugs veth pairs into bridge until it refuses one (EXFULL), their other ends in a network namespace of
// the test's own, and returns the names of those it took. Everything goes when the test ends.
func fillBridge(t *testing.T, bridge string) []string {
	t.Helper()
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	tag := hex.EncodeToString(suffix)
	ns := "sgfill-" + tag
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace (needs root): %v %s", err, out)
	}
	// Deleting the namespace deletes the peers in it, and with them the host ends.
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	const tries = docker.MaxBridgePorts + 1
	var add, plug strings.Builder
	names := make([]string, tries)
	for i := range names {
		names[i] = fmt.Sprintf("f%s%d", tag, i)
		fmt.Fprintf(&add, "link add %s type veth peer name p%d netns %s\n", names[i], i, ns)
		fmt.Fprintf(&plug, "link set %s master %s\n", names[i], bridge)
	}
	if out, err := ipBatch(add.String(), false); err != nil {
		t.Fatalf("making veth pairs: %v %s", err, out)
	}
	// -force goes on past the refusals: the bridge takes what it can and says EXFULL for the rest.
	out, _ := ipBatch(plug.String(), true)
	if refused := strings.Count(strings.ToLower(out), "exchange full"); refused == 0 {
		t.Fatalf("the bridge took all %d ports: %s", tries, out)
	}
	var taken []string
	for _, n := range names {
		master, err := exec.Command("cat", "/sys/class/net/"+n+"/master/uevent").Output()
		if err == nil && strings.Contains(string(master), "INTERFACE="+bridge) {
			taken = append(taken, n)
		}
	}
	return taken
}

func ipBatch(commands string, force bool) (string, error) {
	args := []string{"-batch", "-"}
	if force {
		args = append([]string{"-force"}, args...)
	}
	cmd := exec.Command("ip", args...)
	cmd.Stdin = strings.NewReader(commands)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestBridgeFullIsTheEnginesEXFULL(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"failed to create endpoint x on network y: adding interface veth1 to bridge sg1 failed: exchange full", true},
		{"Error response from daemon: ... Exchange full", true},
		{"failed to create endpoint x on network y: address already in use", false},
		{"", false},
	} {
		var err error
		if tc.msg != "" {
			err = errors.New(tc.msg)
		}
		if got := docker.BridgeFull(err); got != tc.want {
			t.Errorf("BridgeFull(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
