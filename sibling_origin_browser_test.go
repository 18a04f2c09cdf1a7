package sandgate

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// TestSiblingOriginCannotUseSessionInBrowser: the gateway (gw.sb.localhost) and the apps' content origin
// (*.sb.localhost) share a registrable domain, as gw.example.com and *.sandbox.example.com do, so in Chromium a page
// on an app subdomain is same-site with the gateway and its requests carry the victim's SameSite=Strict session
// cookie. That page opening the victim's WebSocket on the gateway is refused; the gateway's own page still opens it.
func TestSiblingOriginCannotUseSessionInBrowser(t *testing.T) {
	testenv.Integration(t)
	ns := testenv.Unique("sgsibling")
	testenv.RemoveNamespace(t, ns)
	port := testenv.FreePort(t)
	const secret = "sibling-origin-test-secret-32-bytes-long!"
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	skip_install_trust
	grace_period 2s
	sandboxes {
		namespace %s
		profile py {
			image %s
			memory 512m
			capabilities shell python filesystem
			app_port 9000
			idle_timeout 10m
		}
	}
}

https://gw.sb.localhost:%d {
	tls internal
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*
	respond "gateway" 200
}

https://*.sb.localhost:%d {
	tls internal
	sandbox_ticket app {
		base_domains sb.localhost
	}
	sandbox_proxy app
}
`, testenv.FreePort(t), port, ns, testenv.Image(t, "base"), port, port)
	g := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{Env: []string{tickets.EnvSecret + "=" + secret}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	https := g.HTTPSClient(t, ctx, 30*time.Second)
	tr := https.Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
	}
	https = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	gw := fmt.Sprintf("https://gw.sb.localhost:%d", port)
	testenv.WaitOK(t, ctx, https, gw+"/")
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	id := g.CreateSandbox(t, "py", "victim")
	ticket := func(perm tickets.Permission) string {
		tk, err := iss.Issue(tickets.IssueRequest{SandboxID: id, Kind: tickets.KindApp, Permission: perm, Subject: "victim"})
		if err != nil {
			t.Fatal(err)
		}
		return tk.Token
	}
	appPath := "/sandboxes/" + id + "/app/9000/"
	if resp, err := https.Get(gw + appPath + "?ticket=" + ticket(tickets.PermRead)); err == nil { // starts it
		resp.Body.Close()
	}
	ctr := testenv.ContainerOf(t, ns, id)
	if out, err := exec.Command("docker", "exec", ctr, "sh", "-c", "mkdir -p /tmp/site && echo '<title>attacker</title>' > /tmp/site/attack.html").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	testenv.StartWSEcho(t, ctr, "9000", "-root", "/tmp/site")
	for { // the echo server answers once it listens
		resp, err := https.Get(gw + appPath + "attack.html?ticket=" + ticket(tickets.PermRead))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the app never answered: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}

	out, err := testenv.RunNode(t, filepath.Join(testenv.RepoRoot(), "testdata", "sibling_origin_browser.cjs"),
		"GW="+gw,
		"VICTIM_URL="+gw+appPath+"attack.html?ticket="+ticket(tickets.PermRead),
		"WS_URL="+strings.Replace(gw, "https://", "wss://", 1)+appPath+"ws",
		fmt.Sprintf("ATTACK_URL=https://9000-%s.sb.localhost:%d/attack.html?ticket=%s", id, port, ticket(tickets.PermRead)))
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, out)
	}
	_, res, _ := strings.Cut(out, "RESULT ")
	res, _, _ = strings.Cut(res, "\n")
	var r struct {
		VictimStatus int
		Cookies      []string
		Own, Sibling string
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatalf("result %q: %v\n%s", res, err, out)
	}
	t.Logf("victim page %d, cookies %q; WebSocket from the gateway's page: %s, from the sibling page: %s",
		r.VictimStatus, r.Cookies, r.Own, r.Sibling)
	if r.VictimStatus != http.StatusOK || len(r.Cookies) == 0 {
		t.Fatalf("the victim has no session: %+v", r)
	}
	if r.Own != "open:ping" {
		t.Errorf("the gateway's own page could not use its session: %s", r.Own)
	}
	if r.Sibling != "blocked" {
		t.Errorf("a sibling app subdomain opened the victim's WebSocket with their cookie: %s", r.Sibling)
	}
}
