package caddymodule_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// netnsServers puts two HTTP servers in a network namespace the test creates (ip netns + a veth pair), on two
// addresses of a /24 only this test uses, and returns those addresses.
func netnsServers(t *testing.T) (allowed, other string) {
	t.Helper()
	n := testenv.NewNetNS(t, "sgeg", "10.213")
	n.IP("-n", n.Name, "addr", "add", n.Subnet+".3/24", "dev", n.NSIf)
	for _, addr := range []string{n.Subnet + ".2", n.Subnet + ".3"} {
		n.ServeHello(addr)
	}
	return n.Subnet + ".2", n.Subnet + ".3"
}

// egressRig is what an egress test stands on: two servers in a network namespace (allowed and other, port 8080),
// a Manager namespace removed at the end, and an internal Docker network for the profile, whose host address gw is
// where its sandboxes find the gateway's egress proxy.
type egressRig struct{ image, allowed, other, ns, network, gw string }

// newEgressRig makes an egressRig; the Manager namespace is nsPrefix made unique, the network that plus
// networkSuffix (made before the gateway starts, as the Manager would, to know its address for the proxy URL).
func newEgressRig(t *testing.T, nsPrefix, networkSuffix string) egressRig {
	t.Helper()
	r := egressRig{image: testenv.Image(t, "base")}
	r.allowed, r.other = netnsServers(t)
	r.ns = testenv.Unique(nsPrefix)
	testenv.RemoveNamespace(t, r.ns)
	r.network = r.ns + networkSuffix
	r.gw = testenv.InternalNetwork(t, r.ns, r.network)
	return r
}

// fetchScript fetches a URL with Python's urllib (which honours HTTP_PROXY) and prints the status and body, or the
// error, on one line.
const fetchScript = `import sys,urllib.request,urllib.error
try:
    r=urllib.request.urlopen(sys.argv[1],timeout=5); print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception as e:
    print("ERR", e)`

// tunnelScript opens n CONNECT tunnels to target through the proxy at host:port, holds them all, and prints each
// answer's status code.
const tunnelScript = `import socket,sys
host,port,target,n=sys.argv[1],int(sys.argv[2]),sys.argv[3],int(sys.argv[4])
held=[];codes=[]
for i in range(n):
    s=socket.create_connection((host,port),timeout=10)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"%(target,target)).encode())
    line=b""
    while not line.endswith(b"\n"):
        c=s.recv(1)
        if not c: break
        line+=c
    f=line.split()
    codes.append(f[1].decode() if len(f)>1 else "ERR")
    held.append(s)
print(" ".join(codes))`

// TestEgressAllowList: a sandbox on an internal network reaches a server the allow-list names through sandgate's
// own forward proxy, is refused (and the refusal logged with its id) for another address, and reaches nothing
// directly; a sandbox with network none reaches nothing at all.
func TestEgressAllowList(t *testing.T) {
	r := newEgressRig(t, "sge", "-egress")
	image, allowed, other, ns, network, gw := r.image, r.allowed, r.other, r.ns, r.network, r.gw
	port := testenv.FreePort(t)
	g := testenv.StartGateway(t, fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %s
		gc_interval 1h
		profile egress {
			image %s
			memory 256m
			network %s
			egress_proxy http://%s:%d
			egress_allow %s pypi.org
		}
		profile sealed {
			image %s
			memory 256m
			network none
			egress_proxy http://%s:%d
		}
	}
}

http://:%d {
	sandbox_egress {
		max_tunnels 3
	}
}
`, ns, image, network, gw, port, allowed, image, gw, port, port), testenv.GatewayOptions{})
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join("/run/sandgate", ns)) })

	code, body := adminDo(t, g, http.MethodPost, "/sandboxes", map[string]any{"profile": "egress", "owner": "tester"})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created struct{ ID string }
	_ = json.Unmarshal(body, &created)
	waitStatus(t, g, created.ID, "ready")
	ctr := ns + "-" + created.ID
	fetch := func(url string, env ...string) string {
		args := append([]string{"exec"}, env...)
		args = append(args, ctr, "python3", "-c", fetchScript, url)
		out, _ := exec.Command("docker", args...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if got := fetch("http://" + allowed + ":8080/"); got != "200 hello from "+allowed {
		t.Fatalf("allowed through the proxy: %q", got)
	}
	if got := fetch("http://" + other + ":8080/"); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, created.ID) {
		t.Fatalf("other address through the proxy: %q", got)
	}
	if got := fetch("http://169.254.169.254/latest/meta-data/"); !strings.HasPrefix(got, "403 ") {
		t.Fatalf("metadata through the proxy: %q", got)
	}
	if got := fetch("http://"+allowed+":8080/", "-e", "HTTP_PROXY=", "-e", "http_proxy="); !strings.HasPrefix(got, "ERR") {
		t.Fatalf("direct from an internal network: %q", got)
	}
	// The tunnel flood of issue 33, from inside a real sandbox: with max_tunnels 3, the fourth tunnel held at once
	// is refused with 429, and the sandbox's next request still goes through once the script's tunnels close.
	out, _ := exec.Command("docker", "exec", ctr, "python3", "-c", tunnelScript, gw, strconv.Itoa(port), allowed+":8080", "4").CombinedOutput()
	if got := strings.TrimSpace(string(out)); got != "200 200 200 429" {
		t.Fatalf("four tunnels held at once with max_tunnels 3: %q", got)
	}
	if got := fetch("http://" + allowed + ":8080/"); got != "200 hello from "+allowed {
		t.Fatalf("allowed after the flood: %q", got)
	}
	logs := g.Logs()
	if !strings.Contains(logs, "egress refused") || !strings.Contains(logs, created.ID) || !strings.Contains(logs, other) {
		t.Fatalf("refusal not logged with the sandbox id and host:\n%s", logs)
	}

	// A network none profile: no interface but loopback, so neither the proxy (its HTTP_PROXY set all the same)
	// nor the server is reachable; connect() fails at once with ENETUNREACH.
	code, body = adminDo(t, g, http.MethodPost, "/sandboxes", map[string]any{"profile": "sealed", "owner": "tester"})
	if code != http.StatusCreated {
		t.Fatalf("create sealed: %d %s", code, body)
	}
	var sealed struct{ ID string }
	_ = json.Unmarshal(body, &sealed)
	waitStatus(t, g, sealed.ID, "ready")
	for _, url := range []string{"http://" + allowed + ":8080/", fmt.Sprintf("http://%s:%d/", gw, port)} {
		out, _ := exec.Command("docker", "exec", ns+"-"+sealed.ID, "python3", "-c", fetchScript, url).CombinedOutput()
		if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "ERR") || !strings.Contains(got, "Network is unreachable") {
			t.Fatalf("network none reached %s: %q", url, got)
		}
	}
}
