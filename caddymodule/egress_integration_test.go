package caddymodule_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testenv"
)

// netnsServers puts two HTTP servers in a network namespace the test creates (ip netns + a veth pair), on two
// addresses of a /24 only this test uses, and returns those addresses.
func netnsServers(t *testing.T) (allowed, other string) {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	suffix := hex.EncodeToString(b[:3])
	ns, hostIf, nsIf := "sgeg"+suffix, "sgv"+suffix, "sgp"+suffix
	subnet := fmt.Sprintf("10.213.%d", 1+int(b[3])%250)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() })
	run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", hostIf).Run() })
	run("link", "set", nsIf, "netns", ns)
	run("addr", "add", subnet+".1/24", "dev", hostIf)
	run("link", "set", hostIf, "up")
	run("-n", ns, "addr", "add", subnet+".2/24", "dev", nsIf)
	run("-n", ns, "addr", "add", subnet+".3/24", "dev", nsIf)
	run("-n", ns, "link", "set", nsIf, "up")
	run("-n", ns, "link", "set", "lo", "up")
	for _, addr := range []string{subnet + ".2", subnet + ".3"} {
		cmd := exec.Command("ip", "netns", "exec", ns, "/usr/bin/python3", "-c",
			`import http.server,sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body=("hello from "+sys.argv[1]).encode()
        self.send_response(200); self.send_header("Content-Length",str(len(body))); self.end_headers(); self.wfile.write(body)
http.server.HTTPServer((sys.argv[1],8080),H).serve_forever()`, addr)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		deadline := time.Now().Add(testenv.WaitLimit)
		for {
			c, err := net.DialTimeout("tcp", addr+":8080", time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("server on %s in netns %s: %v", addr, ns, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return subnet + ".2", subnet + ".3"
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

// TestEgressAllowList: a sandbox on an internal network reaches a server the allow-list names through sandgate's
// own forward proxy, is refused (and the refusal logged with its id) for another address, and reaches nothing
// directly; a sandbox with network none reaches nothing at all.
func TestEgressAllowList(t *testing.T) {
	image := testenv.Image(t, "base")
	allowed, other := netnsServers(t)
	ns := testenv.Unique("sge")
	removeLifecycleNamespace(t, ns)
	network := ns + "-egress"
	if out, err := exec.Command("docker", "network", "create", "--internal", "--label", ns+".managed=true", network).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", network).Run() })
	gwOut, err := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", network).Output()
	gw := strings.TrimSpace(string(gwOut))
	if err != nil || gw == "" {
		t.Fatalf("gateway of %s: %v %q", network, err, gw)
	}
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
	sandbox_egress
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
