package docker_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// The attacks of issue 13 that run inside a sandbox, each performed for real against our image on the real engine.

// connectScript tries a TCP connection from inside a sandbox and prints CONNECTED or FAILED with the reason.
const connectScript = `import socket,sys
try:
    s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=3); s.close(); print("CONNECTED")
except Exception as e:
    print("FAILED",type(e).__name__,e)`

// sweepPolicyAfter removes the packet-filter rules of the test's networks once they are gone. Registered before
// the harness, it runs after the namespace cleanup (cleanups run last-in first-out).
func sweepPolicyAfter(t *testing.T) {
	t.Helper()
	drv, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drv.SweepNetworkPolicy(context.Background()); err != nil {
			t.Errorf("sweeping the packet filter: %v", err)
		}
		drv.Close()
	})
}

func (h *harness) createFor(profile, owner string) *sandboxes.Sandbox {
	h.t.Helper()
	sb, err := h.mgr.Create(context.Background(), sandboxes.CreateRequest{Profile: profile, Owner: owner})
	if err != nil {
		h.t.Fatalf("create for %s: %v", owner, err)
	}
	return sb
}

// agentGet calls the sandbox's agent the way the gateway does (its address and token from the Manager).
func agentGet(t *testing.T, tg sandboxes.Target, token, path string) (int, string) {
	t.Helper()
	base, hc := agentapi.BaseURL(tg.Addr, &http.Client{Timeout: 10 * time.Second})
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	if token != "" {
		req.Header.Set(agentapi.TokenHeader, token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitApp waits until the sandbox's service on port answers through the agent's port proxy (the /app path).
func waitApp(t *testing.T, tg sandboxes.Target, port int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := agentGet(t, tg, tg.Token, fmt.Sprintf("/proxy/%d/", port))
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox's own app on port %d does not answer through its agent: %d %s", port, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (h *harness) connect(id, host string, port int) string {
	h.t.Helper()
	out, _ := h.exec(id, "python3", "-c", connectScript, host, fmt.Sprint(port))
	return strings.TrimSpace(out)
}

func hostOf(t *testing.T, addr string) string {
	t.Helper()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("agent address %q: %v", addr, err)
	}
	return host
}

// networkGateway is the host's address on a Docker network.
func (h *harness) networkGateway(name string) string {
	h.t.Helper()
	nw, err := h.cli.NetworkInspect(context.Background(), name, networkInspectOptions())
	if err != nil || len(nw.IPAM.Config) == 0 || nw.IPAM.Config[0].Gateway == "" {
		h.t.Fatalf("gateway address of %s: %v", name, err)
	}
	return nw.IPAM.Config[0].Gateway
}

// hostListener accepts TCP connections on addr on the host and counts them.
func hostListener(t *testing.T, addr string) (port int, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	count := make(chan int, 1)
	count <- 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := <-count
			count <- n + 1
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() int { n := <-count; count <- n; return n }
}

// TestOwnersCannotReachEachOther: owner B's sandbox serves on 0.0.0.0; owner A's sandbox on the same internal
// network can reach it neither by address nor by container name, while B's own /app still answers through its
// agent, A still reaches the egress proxy on the host, and the gateway still reaches both agents. Under runc and
// under gVisor (whose own network stack runs inside the sandbox's namespace, behind the same packet filter).
func TestOwnersCannotReachEachOther(t *testing.T) {
	eachRuntime(t, ownersCannotReachEachOther)
}

func ownersCannotReachEachOther(t *testing.T, runtime string) {
	sweepPolicyAfter(t)
	p := smallProfile("small", "")
	p.Runtime = runtime
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour})
	// The network exists from the first launch on; the egress proxy listens on its gateway address.
	first := h.createFor("small", "owner-b")
	tgB := h.ready(first.ID)
	gw := h.networkGateway(h.ns + "-internal")
	proxyPort, proxyHits := hostListener(t, gw+":0")
	otherPort, otherHits := hostListener(t, gw+":0")
	p.Egress = &sandboxes.Egress{Proxy: fmt.Sprintf("http://%s:%d", gw, proxyPort)}
	p.Image = h.image
	if err := h.mgr.Apply(context.Background(), sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	a := h.createFor("small", "owner-a")
	tgA := h.ready(a.ID)

	if out, err := execCommand("docker", "exec", "-d", h.containerName(first.ID), "python3", "-m", "http.server", "8000", "--bind", "0.0.0.0", "--directory", "/workspace"); err != nil {
		t.Fatalf("starting B's server: %v %s", err, out)
	}
	waitApp(t, tgB, 8000)

	ipB := hostOf(t, tgB.Addr)
	if got := h.connect(a.ID, ipB, 8000); !strings.HasPrefix(got, "FAILED") {
		t.Errorf("A reached B's server by address %s: %s", ipB, got)
	}
	if got := h.connect(a.ID, h.containerName(first.ID), 8000); !strings.HasPrefix(got, "FAILED") {
		t.Errorf("A reached B's server by name: %s", got)
	}
	if got := h.connect(a.ID, ipB, agentapi.DefaultPort); !strings.HasPrefix(got, "FAILED") {
		t.Errorf("A reached B's agent: %s", got)
	}
	// A's egress proxy is on the host; nothing else of the host is.
	if got := h.connect(a.ID, gw, proxyPort); got != "CONNECTED" || proxyHits() == 0 {
		t.Errorf("A cannot reach its egress proxy at %s:%d: %s", gw, proxyPort, got)
	}
	if got := h.connect(a.ID, gw, otherPort); !strings.HasPrefix(got, "FAILED") || otherHits() != 0 {
		t.Errorf("A reached another service of the host at %s:%d: %s", gw, otherPort, got)
	}
	// Nothing lost for the victim or the gateway.
	waitApp(t, tgB, 8000)
	if code, body := agentGet(t, tgA, tgA.Token, "/v1/info"); code != http.StatusOK {
		t.Errorf("the gateway cannot reach A's agent: %d %s", code, body)
	}
	if code, body := agentGet(t, tgB, tgB.Token, "/v1/info"); code != http.StatusOK {
		t.Errorf("the gateway cannot reach B's agent: %d %s", code, body)
	}
}

// netnsTargets makes a network namespace reachable from the host through a veth pair, with one HTTP server on an
// ordinary address of a /24 only this test uses and one on a link-local address of that namespace's loopback, routed from the host. It returns both addresses (port 8080).
func netnsTargets(t *testing.T) (plain, linkLocal string) {
	t.Helper()
	n := testenv.NewNetNS(t, "sgni", "10.214")
	linkLocal = fmt.Sprintf("169.254.%d.7", n.Octet)
	// The link-local address sits on the namespace's loopback (this kernel has no dummy interfaces).
	n.IP("-n", n.Name, "addr", "add", linkLocal+"/32", "dev", "lo")
	n.IP("-n", n.Name, "route", "add", "default", "via", n.Subnet+".1")
	n.IP("route", "add", linkLocal+"/32", "via", n.Subnet+".2", "dev", n.HostIf)
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", linkLocal+"/32").Run() })
	for _, addr := range []string{n.Subnet + ".2", linkLocal} {
		n.ServeHello(addr)
	}
	return n.Subnet + ".2", linkLocal
}

// TestDirectEgressPolicyOnBridge: a sandbox with network bridge (deploy/astrbot's setting) reaches an ordinary
// address directly, but not a link-local one (where cloud metadata lives; the test's own listener stands in for
// it), not the host's own services, and not a sibling sandbox. Rules removed behind the gateway's back (a firewall
// reload) come back when the gateway restarts and adopts its sandboxes. Under runc and under gVisor.
func TestDirectEgressPolicyOnBridge(t *testing.T) {
	eachRuntime(t, directEgressPolicyOnBridge)
}

func directEgressPolicyOnBridge(t *testing.T, runtime string) {
	sweepPolicyAfter(t)
	plain, linkLocal := netnsTargets(t)
	p := smallProfile("open", "")
	p.Network = sandboxes.NetworkBridge
	p.Runtime = runtime
	cfg := sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour}
	h := newHarness(t, cfg)
	a := h.createFor("open", "owner-a")
	tgA := h.ready(a.ID)
	b := h.createFor("open", "owner-b")
	tgB := h.ready(b.ID)
	if got := string(h.inspect(a.ID).HostConfig.NetworkMode); got != h.ns+"-bridge" {
		t.Fatalf("network bridge put the sandbox on %q, want the gateway's own %s-bridge", got, h.ns)
	}
	gw := h.networkGateway(h.ns + "-bridge")
	hostPort, hostHits := hostListener(t, gw+":0")
	vethPort, vethHits := hostListener(t, strings.TrimSuffix(plain, ".2")+".1:0")

	check := func(stage string) {
		t.Helper()
		if got := h.connect(a.ID, plain, 8080); got != "CONNECTED" {
			t.Errorf("%s: allowed traffic to %s does not flow: %s", stage, plain, got)
		}
		if got := h.connect(a.ID, linkLocal, 8080); !strings.HasPrefix(got, "FAILED") {
			t.Errorf("%s: the sandbox reached the link-local listener %s: %s", stage, linkLocal, got)
		}
		if got := h.connect(a.ID, gw, hostPort); !strings.HasPrefix(got, "FAILED") || hostHits() != 0 {
			t.Errorf("%s: the sandbox reached a host service on %s:%d: %s", stage, gw, hostPort, got)
		}
		vethAddr := strings.TrimSuffix(plain, ".2") + ".1"
		if got := h.connect(a.ID, vethAddr, vethPort); !strings.HasPrefix(got, "FAILED") || vethHits() != 0 {
			t.Errorf("%s: the sandbox reached a host service on another host address %s:%d: %s", stage, vethAddr, vethPort, got)
		}
		if got := h.connect(a.ID, hostOf(t, tgB.Addr), agentapi.DefaultPort); !strings.HasPrefix(got, "FAILED") {
			t.Errorf("%s: the sandbox reached a sibling's agent: %s", stage, got)
		}
	}
	// The listener is really there: the host itself reaches it.
	if c, err := net.DialTimeout("tcp", linkLocal+":8080", 5*time.Second); err != nil {
		t.Fatalf("the host cannot reach the test's link-local listener: %v", err)
	} else {
		c.Close()
	}
	check("first start")
	if code, body := agentGet(t, tgA, tgA.Token, "/v1/info"); code != http.StatusOK {
		t.Fatalf("the gateway cannot reach the agent: %d %s", code, body)
	}

	// A flushed filter (a firewall reload) is repaired when the gateway restarts and starts the sandbox again.
	h.mgr.Close()
	drv, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.RemoveNetworkPolicy(context.Background(), h.ns+"-bridge"); err != nil {
		t.Fatal(err)
	}
	drv.Close()
	if got := h.connect(a.ID, linkLocal, 8080); got != "CONNECTED" {
		t.Fatalf("without its rules the attack should work (the test's premise): %s", got)
	}
	h.start(cfg) // the restarted gateway adopts both sandboxes, which brings the network's rules back
	tgA = h.ready(a.ID)
	tgB = h.ready(b.ID)
	check("after a restart")
}

// dnsListener counts UDP datagrams on addr whose payload contains label.
func dnsListener(t *testing.T, addr, label string) (seen func() int, ok bool) {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Logf("no resolver on %s: %v", addr, err)
		return func() int { return 0 }, false
	}
	t.Cleanup(func() { pc.Close() })
	count := make(chan int, 1)
	count <- 0
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if strings.Contains(strings.ToLower(string(buf[:n])), label) {
				c := <-count
				count <- c + 1
			}
		}
	}()
	return func() int { c := <-count; count <- c; return c }, true
}

// TestInternalSandboxCannotResolveOutside: a name looked up inside an internal sandbox never reaches a resolver
// outside it. The test runs its own resolvers (on the host's loopback and on the network's gateway address) and
// first shows, with a control container of its own on a network that may forward, that Docker's embedded
// resolver does deliver queries to a resolver there. Under runc and under gVisor, where nothing reaches Docker's
// embedded resolver at all (127.0.0.11 is gVisor's own loopback), so not even the network's own names resolve.
func TestInternalSandboxCannotResolveOutside(t *testing.T) {
	eachRuntime(t, internalSandboxCannotResolveOutside)
}

func internalSandboxCannotResolveOutside(t *testing.T, runtime string) {
	sweepPolicyAfter(t)
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{runtimeProfile("small", runtime)}, GCInterval: time.Hour})
	sb := h.createFor("small", "owner-a")
	h.ready(sb.ID)
	if dns := h.inspect(sb.ID).HostConfig.DNS; len(dns) != 1 || dns[0] != docker.InternalDNS {
		t.Fatalf("the sandbox's resolver upstreams are %v", dns)
	}
	gw := h.networkGateway(h.ns + "-internal")

	// Control: a container of the test's own on its own network, with the test's resolver as upstream.
	ctlNet := h.ns + "-dnsctl"
	if out, err := execCommand("docker", "network", "create", ctlNet); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	t.Cleanup(func() { _, _ = execCommand("docker", "network", "rm", ctlNet) })
	ctlGW := h.networkGateway(ctlNet)
	ctlSeen, ok := dnsListener(t, ctlGW+":53", "ctlprobe")
	if !ok {
		t.Fatalf("cannot run the control resolver on %s", ctlGW)
	}
	if out, err := execCommand("docker", "run", "--rm", "--network", ctlNet, "--dns", ctlGW, "--entrypoint", "python3", h.image,
		"-c", "import socket\ntry: socket.getaddrinfo('ctlprobe.example',80)\nexcept Exception as e: print(e)"); err != nil {
		t.Fatalf("control container: %v %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ctlSeen() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if ctlSeen() == 0 {
		t.Fatal("control: the embedded resolver never forwarded to the test's resolver; the test would prove nothing")
	}

	label := "exfil" + hex.EncodeToString([]byte(sb.ID[len(sb.ID)-4:]))
	loopSeen, _ := dnsListener(t, "127.0.0.1:53", label)
	gwSeen, _ := dnsListener(t, gw+":53", label)
	script := `import socket,sys
for name in sys.argv[1:]:
    try: print(name, socket.getaddrinfo(name,80))
    except Exception as e: print(name, "FAILED", e)
# and straight to the embedded resolver, as an attacker would
q=b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"+b"".join(bytes([len(p)])+p.encode() for p in sys.argv[1].split("."))+b"\x00\x00\x01\x00\x01"
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(5)
s.sendto(q,("127.0.0.11",53))
try: print("embedded answered rcode", s.recv(512)[3]&15)
except Exception as e: print("embedded", e)`
	out, _ := h.exec(sb.ID, "python3", "-c", script, label+".secret.example", label+"2.example", label+"3")
	if !strings.Contains(out, "FAILED") {
		t.Errorf("a name resolved inside the internal sandbox: %s", out)
	}
	// Give a forwarded query every chance to arrive before concluding none did.
	if out2, _ := h.exec(sb.ID, "getent", "hosts", label+"4.example"); strings.TrimSpace(out2) != "" {
		t.Errorf("getent resolved an outside name: %s", out2)
	}
	if n := loopSeen() + gwSeen(); n != 0 {
		t.Errorf("%d queries from the internal sandbox reached a resolver outside it: %s", n, out)
	}
	// The network's own names still resolve under runc (the embedded resolver answers those itself); under gVisor
	// the embedded resolver is out of reach (docs/security.md "gVisor", DNS) and they do not.
	out, err := h.exec(sb.ID, "getent", "hosts", h.containerName(sb.ID))
	if resolved := err == nil && strings.TrimSpace(out) != ""; resolved != (runtime == "") {
		t.Errorf("under runtime %q the sandbox's own name resolves: %v (%q %v)", runtime, resolved, out, err)
	}
}

// TestAgentTokenUnreadableInSandbox: code in the sandbox, as the sandbox user, finds the agent's token in no
// environment (its own, PID 1's, the agent's), no file and not in the agent's memory; the gateway still
// authenticates, also after the sandbox was stopped and started again. Under runc and under gVisor.
func TestAgentTokenUnreadableInSandbox(t *testing.T) {
	eachRuntime(t, agentTokenUnreadableInSandbox)
}

func agentTokenUnreadableInSandbox(t *testing.T, runtime string) {
	sweepPolicyAfter(t)
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{runtimeProfile("small", runtime)}, GCInterval: time.Hour})
	sb := h.createFor("small", "owner-a")
	tg := h.ready(sb.ID)
	look := func(stage string) {
		t.Helper()
		// An authenticated call first: the agent has just handled the token.
		if code, body := agentGet(t, tg, tg.Token, "/v1/info"); code != http.StatusOK {
			t.Fatalf("%s: the gateway cannot authenticate: %d %s", stage, code, body)
		}
		if code, _ := agentGet(t, tg, agentapi.TokenDigest(tg.Token), "/v1/info"); code != http.StatusUnauthorized {
			t.Fatalf("%s: the digest in the environment authenticates (%d)", stage, code)
		}
		var seen strings.Builder
		for _, argv := range [][]string{
			{"id", "-u"},
			{"env"},
			{"sh", "-c", "cat /proc/1/environ; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; done"},
			{"sh", "-c", "find /run /tmp /home /workspace /etc -xdev -type f -size -1024k -exec cat {} + 2>/dev/null"},
		} {
			out, _ := h.exec(sb.ID, argv...)
			seen.WriteString(out)
		}
		if !strings.HasPrefix(seen.String(), "65532") {
			t.Fatalf("%s: not running as the sandbox user: %.40s", stage, seen.String())
		}
		if strings.Contains(seen.String(), tg.Token) {
			t.Errorf("%s: the token is readable inside the sandbox", stage)
		}
		// The agent's memory holds the tokens of the requests it served: it must be closed to the sandbox user.
		mem, _ := h.exec(sb.ID, "python3", "-c", `import os
for p in os.listdir("/proc"):
    if not p.isdigit(): continue
    try: exe=os.readlink(f"/proc/{p}/exe")
    except Exception as e: exe=str(e)
    try: cmd=open(f"/proc/{p}/cmdline","rb").read()
    except Exception: cmd=b""
    if not cmd.split(b"\0")[0].endswith(b"sandgate-agent"): continue
    for f in ("environ","mem","maps"):
        try: open(f"/proc/{p}/{f}","rb").read(16); print(p,f,"READABLE")
        except Exception as e: print(p,f,type(e).__name__)`)
		if !strings.Contains(mem, " environ PermissionError") || !strings.Contains(mem, " mem PermissionError") || strings.Contains(mem, "READABLE") {
			t.Errorf("%s: the agent's memory is open to the sandbox user:\n%s", stage, mem)
		}
	}
	look("first start")
	if err := h.mgr.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	tg = h.ready(sb.ID)
	look("after a restart")
}

// TestNetworkNoneSocketDirIsBounded: a network none sandbox can write its socket directory (the agent must create
// its socket there) but only into a 64 KiB tmpfs of its own, never the host's /run; its socket keeps working.
func TestNetworkNoneSocketDirIsBounded(t *testing.T) {
	p := smallProfile("sealed", "")
	p.Network = sandboxes.NetworkNone
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{p}, GCInterval: time.Hour})
	sb := h.createFor("sealed", "owner-a")
	t.Cleanup(func() { _ = h.mgr.Delete(context.Background(), sb.ID) })
	tg := h.ready(sb.ID)
	if !strings.HasPrefix(tg.Addr, "unix/") {
		t.Fatalf("agent address %q is not a socket", tg.Addr)
	}
	out, _ := h.exec(sb.ID, "sh", "-c", `id -u; dd if=/dev/zero of=/run/sandgate/fill bs=64k count=160 2>&1 | grep -o "No space left";
i=0; while [ $i -lt 200 ] && touch /run/sandgate/f$i 2>/dev/null; do i=$((i+1)); done; echo files=$i;
du -sk /run/sandgate | cut -f1; stat -f -c %T /run/sandgate`)
	lines := strings.Fields(out)
	t.Logf("inside: %s", strings.Join(lines, " "))
	if len(lines) == 0 || lines[0] != "65532" {
		t.Fatalf("not the sandbox user: %s", out)
	}
	if !strings.Contains(out, "No space left") {
		t.Errorf("10 MiB went into the socket directory: %s", out)
	}
	if !strings.Contains(out, "files=") || strings.Contains(out, "files=200") {
		t.Errorf("the sandbox created unbounded files: %s", out)
	}
	if !strings.Contains(out, "tmpfs") {
		t.Errorf("the socket directory is not a tmpfs: %s", out)
	}
	if code, body := agentGet(t, tg, tg.Token, "/v1/info"); code != http.StatusOK {
		t.Fatalf("the socket stopped working: %d %s", code, body)
	}
	// A restart finds its directory still bounded and the socket made again.
	if err := h.mgr.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	tg = h.ready(sb.ID)
	if code, body := agentGet(t, tg, tg.Token, "/v1/info"); code != http.StatusOK {
		t.Fatalf("the socket does not work after a restart: %d %s", code, body)
	}
}
