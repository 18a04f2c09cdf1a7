package docker_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// What gVisor cannot do that runc can, on the real engine. Profile validation refuses network none and
// network_spares under runsc (sandboxes.Profile.refusedUnderRuntime, docs/security.md "Refused under gVisor")
// because of what the first two tests show; if a future runsc behaves otherwise, they fail and the refusal can go.
// The DNS tests show Docker's embedded resolver out of gVisor's reach and the gateway's own resolv.conf making
// names resolve in runsc sandboxes with direct egress (sandboxes/resolvconf.go).

// dockerCLI runs docker with args and fails t with its output if it fails.
func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestGVisorKeepsUnixSocketsInside: a Unix socket bound under runsc in a host directory mounted into the sandbox
// (as the agent of a network none sandbox binds its socket) is not one the host can connect to; under runc it is.
// So network none is refused under runsc.
func TestGVisorKeepsUnixSocketsInside(t *testing.T) {
	testenv.Runsc(t)
	image := testenv.Image(t, "base")
	const bind = `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind("/s/agent.sock")
s.listen(1)
print("bound", flush=True)
sys.stdin.read()`
	for _, rt := range testRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			name := testenv.Unique("sg-uds")
			t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
			args := []string{"run", "-d", "-i", "--name", name, "--network", "none", "-v", dir + ":/s", "--entrypoint", "python3"}
			if rt.runtime != "" {
				args = append(args, "--runtime", rt.runtime)
			}
			dockerCLI(t, append(args, image, "-c", bind)...)
			testenv.WaitUntil(t, "the sandbox to bind its socket", func() bool {
				out, _ := exec.Command("docker", "logs", name).CombinedOutput()
				return strings.Contains(string(out), "bound")
			})
			c, err := net.Dial("unix", filepath.Join(dir, "agent.sock"))
			if rt.runtime == "" {
				if err != nil {
					t.Fatalf("under runc the host cannot connect to the sandbox's socket: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("under runsc the host connected to a socket bound in the sandbox: network none could work, lift its refusal")
			}
			t.Logf("under runsc the host's connect fails: %v", err)
		})
	}
}

// TestGVisorStripsAJoinedNamespace: a runsc sandbox joining another container's network namespace (as a sandbox
// joins a network spare's holder) takes the namespace's address off its interface, and it stays off after the
// sandbox ends, so a restart in that namespace would have no network. So network_spares is refused under runsc.
func TestGVisorStripsAJoinedNamespace(t *testing.T) {
	testenv.Runsc(t)
	image := testenv.Image(t, "base")
	holder := testenv.Unique("sg-holder")
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", holder).Run() })
	dockerCLI(t, "run", "-d", "--name", holder, "--network", "bridge", "--entrypoint", "sleep", image, "infinity")
	addr := dockerCLI(t, "inspect", "-f", "{{.NetworkSettings.IPAddress}}", holder)
	if net.ParseIP(addr) == nil {
		t.Fatalf("holder address %q", addr)
	}
	// /proc/net/fib_trie lists the namespace's local addresses (the holder runs under runc: the host's view).
	local := func() bool {
		return strings.Contains(dockerCLI(t, "exec", holder, "cat", "/proc/net/fib_trie"), addr)
	}
	if !local() {
		t.Fatalf("the holder's namespace lacks its own address %s before any sandbox joined", addr)
	}
	for _, rt := range testRuntimes {
		args := []string{"run", "--rm", "--network", "container:" + holder, "--entrypoint", "python3"}
		if rt.runtime != "" {
			args = append(args, "--runtime", rt.runtime)
		}
		dockerCLI(t, append(args, image, "-c", "print('joined')")...)
		has := local()
		t.Logf("after a %s sandbox ran in the holder's namespace, its address is there: %v", rt.name, has)
		switch {
		case rt.runtime == "" && !has:
			t.Fatalf("a runc sandbox took the holder's address %s away", addr)
		case rt.runtime == sandboxes.RuntimeGVisor && has:
			t.Fatal("the holder keeps its address after a runsc sandbox ran in its namespace: network_spares could work, lift its refusal")
		}
	}
}

// TestGVisorMissesTheEmbeddedResolver: on a user-defined network (the gateway's bridge, an operator's named one)
// Docker's resolv.conf names its embedded resolver, 127.0.0.11, which listens in the container's namespace on the
// host's side. A runsc sandbox's 127.0.0.11 is gVisor's own loopback, so its lookups reach no resolver: a test
// resolver set as the network's upstream (--dns) hears the runc container's query and never the runsc one's.
// Names do not resolve in runsc sandboxes on bridge or named networks (docs/security.md "gVisor"); addresses and
// the egress proxy (which resolves for internal profiles) work.
func TestGVisorMissesTheEmbeddedResolver(t *testing.T) {
	testenv.Runsc(t)
	image := testenv.Image(t, "base")
	network := testenv.Unique("sg-gvdns")
	dockerCLI(t, "network", "create", network)
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", network).Run() })
	gw := dockerCLI(t, "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", network)
	label := strings.ReplaceAll(testenv.Unique("gvdns"), "-", "")
	seen, ok := dnsListener(t, gw+":53", label)
	if !ok {
		t.Fatalf("cannot run the test's resolver on %s", gw)
	}
	lookup := func(runtime, name string) string {
		args := []string{"run", "--rm", "--network", network, "--dns", gw, "--entrypoint", "python3"}
		if runtime != "" {
			args = append(args, "--runtime", runtime)
		}
		return dockerCLI(t, append(args, image, "-c",
			"import socket,sys\ntry: print(socket.getaddrinfo(sys.argv[1], 80))\nexcept Exception as e: print('FAILED', e)", name)...)
	}
	// gVisor first: its lookup has failed by the time docker run returns, and a query the embedded resolver
	// forwarded would have reached the test's resolver before that failure.
	out := lookup(sandboxes.RuntimeGVisor, label+"gvisor.example")
	if n := seen(); n != 0 || !strings.Contains(out, "FAILED") {
		t.Fatalf("a runsc sandbox's lookup reached the network's upstream (%d queries): %s; names could resolve, update docs/security.md", n, out)
	}
	// The control: runc's lookup does reach it, so the test would see one.
	lookup("", label+"runc.example")
	testenv.WaitUntil(t, "the runc container's query at the test's resolver", func() bool { return seen() > 0 })
}

// dnsResponder answers every A query on addr:53 with 10.9.8.7 (and every other type with no records); it prints
// "ready" once bound.
const dnsResponder = `import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(512)
    i = 12
    while i < len(q) and q[i] != 0:
        i += q[i] + 1
    if i + 5 > len(q):
        continue
    a = q[i+1:i+3] == b"\x00\x01"
    head = q[:2] + b"\x81\x80" + q[4:6] + (b"\x00\x01" if a else b"\x00\x00") + b"\x00\x00\x00\x00"
    answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + bytes([10, 9, 8, 7]) if a else b""
    s.sendto(head + q[12:i+5] + answer, peer)`

// TestGVisorBridgeSandboxResolves: a runsc sandbox on the gateway's bridge network resolves names through the host's
// resolvers, which the gateway writes into a resolv.conf of its own for it (sandboxes/resolvconf.go), since
// Docker's embedded resolver is out of gVisor's reach (TestGVisorMissesTheEmbeddedResolver). The host's resolver
// here is the test's own, in a network namespace reachable like any outside address; the host's resolv.conf the
// Manager reads names systemd-resolved's loopback stub first, which a sandbox cannot use and which is skipped.
func TestGVisorBridgeSandboxResolves(t *testing.T) {
	testenv.Runsc(t)
	sweepPolicyAfter(t)
	n := testenv.NewNetNS(t, "sgdns", "10.216")
	n.IP("-n", n.Name, "route", "add", "default", "via", n.Subnet+".1")
	resolver := n.Subnet + ".2"
	cmd := exec.Command("ip", "netns", "exec", n.Name, "/usr/bin/python3", "-c", dnsResponder, resolver)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the test's resolver: %q %v", line, err)
	}
	hostConf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(hostConf, []byte("nameserver 127.0.0.53\nnameserver "+resolver+"\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := runtimeProfile("open", sandboxes.RuntimeGVisor)
	p.Network = sandboxes.NetworkBridge
	p.Image = testenv.Image(t, "base")
	h := newHarnessResolving(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}}, testenv.Image(t, "base"), "", hostConf)
	sb := h.create("open")
	resolve := func(stage string) {
		t.Helper()
		h.ready(sb.ID)
		out, err := h.exec(sb.ID, "python3", "-c", "import socket; print(socket.getaddrinfo('anything.example', 80, socket.AF_INET)[0][4][0])")
		if err != nil || strings.TrimSpace(out) != "10.9.8.7" {
			t.Fatalf("%s: a runsc sandbox on bridge resolving a name: %q %v", stage, out, err)
		}
	}
	resolve("created")
	// A reboot empties /run, where the file lives; every launch writes it again (resolvConfFor), before the
	// stopped sandbox's container, which mounts it, starts again.
	if err := h.mgr.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	h.mgr.Close()
	if err := os.Remove(filepath.Join("/run/sandgate", h.ns, "resolv.conf")); err != nil {
		t.Fatalf("the gateway's resolv.conf: %v", err)
	}
	h.start(sandboxes.Config{Profiles: []sandboxes.Profile{p}})
	resolve("after a gateway restart with /run emptied")
	if conf, _ := h.exec(sb.ID, "cat", "/etc/resolv.conf"); strings.Contains(conf, "127.0.0.") {
		t.Errorf("the sandbox's resolv.conf names a loopback resolver:\n%s", conf)
	}
}
