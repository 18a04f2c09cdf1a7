package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// NetNS is a network namespace a test creates, joined to the host by a veth pair on a /24 only that test uses:
// the host's end is Subnet.1, the namespace's end Subnet.2. Egress tests put their target servers in one, so
// traffic goes only to addresses the test itself made. Everything is removed when the test ends.
type NetNS struct {
	Name string
	// Subnet is the /24's first three octets ("10.213.7"); Octet is its third.
	Subnet string
	Octet  int
	// HostIf is the host's end of the veth pair, NSIf the namespace's.
	HostIf, NSIf string
	t            testing.TB
}

// NewNetNS creates the namespace and its veth pair on a random /24 under net16 (two octets, e.g. "10.213": one per
// test file, so parallel packages never share a subnet). prefix starts the names of the namespace and of the
// interfaces; with the random suffix they must stay within an interface name's 15 bytes, so it has four letters
// at most.
func NewNetNS(t testing.TB, prefix, net16 string) *NetNS {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b[:3])
	n := &NetNS{Name: prefix + suffix, HostIf: prefix + "h" + suffix, NSIf: prefix + "p" + suffix, Octet: 1 + int(b[3])%250, t: t}
	n.Subnet = fmt.Sprintf("%s.%d", net16, n.Octet)
	n.IP("netns", "add", n.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", n.Name).Run() })
	n.IP("link", "add", n.HostIf, "type", "veth", "peer", "name", n.NSIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", n.HostIf).Run() })
	n.IP("link", "set", n.NSIf, "netns", n.Name)
	n.IP("addr", "add", n.Subnet+".1/24", "dev", n.HostIf)
	n.IP("link", "set", n.HostIf, "up")
	n.IP("-n", n.Name, "addr", "add", n.Subnet+".2/24", "dev", n.NSIf)
	n.IP("-n", n.Name, "link", "set", n.NSIf, "up")
	n.IP("-n", n.Name, "link", "set", "lo", "up")
	return n
}

// IP runs the ip command with args, failing the test if it fails.
func (n *NetNS) IP(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %v: %v %s", args, err, out)
	}
}

// ServeHello starts an HTTP server inside the namespace on addr:8080 that answers every GET with "hello from
// <addr>", and waits until it accepts connections.
func (n *NetNS) ServeHello(addr string) {
	n.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", n.Name, "/usr/bin/python3", "-c", `import http.server,sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body=("hello from "+sys.argv[1]).encode()
        self.send_response(200); self.send_header("Content-Length",str(len(body))); self.end_headers(); self.wfile.write(body)
http.server.HTTPServer((sys.argv[1],8080),H).serve_forever()`, addr)
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(WaitLimit)
	for {
		c, err := net.DialTimeout("tcp", addr+":8080", time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("server on %s in netns %s: %v", addr, n.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// InternalNetwork creates a Docker network with --internal (its containers reach only the host), labelled as
// managed in namespace ns so RemoveNamespace removes it too, and returns the host's address on it: where a
// sandbox on it finds the gateway's egress proxy.
func InternalNetwork(t testing.TB, ns, name string) (gateway string) {
	t.Helper()
	if out, err := exec.Command("docker", "network", "create", "--internal", "--label", ns+".managed=true", name).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", name).Run() })
	out, err := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", name).Output()
	gateway = strings.TrimSpace(string(out))
	if err != nil || gateway == "" {
		t.Fatalf("gateway of %s: %v %q", name, err, gateway)
	}
	return gateway
}
