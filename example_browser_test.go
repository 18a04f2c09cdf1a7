package sandgate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// The app the test serves inside a sandbox: a page that fetches a file over HTTP and has a WebSocket message
// echoed (wsecho -root serves the directory and echoes WebSockets).
const exampleAppHTML = `<!doctype html><title>sandbox app</title><p id=msg>sandbox app</p>
<script>
const echo = (msg) => new Promise((resolve, reject) => {
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/echo');
  ws.onopen = () => ws.send(msg);
  ws.onmessage = (e) => { resolve(e.data); ws.close(); };
  ws.onerror = () => reject(new Error('websocket error'));
});
(async () => {
  const http = (await (await fetch('data.txt')).text()).trim();
  const ws = await echo('ping-' + http);
  window.appResult = { http, ws, origin: location.origin };
})().catch((e) => { window.appResult = { error: e.message }; });
</script>
`

// exampleAttackHTML is what a hostile sandbox serves: with the operator logged in to the console in the same
// browser, its script tries to read the console and to stop and delete a sandbox with the operator's session.
func exampleAttackHTML(consoleBase, victim string) string {
	return fmt.Sprintf(`<!doctype html><title>attack</title><body>
<script>
const CONSOLE = %q, VICTIM = %q;
(async () => {
  const out = {};
  async function tryIt(name, fn) { try { out[name] = await fn(); } catch (e) { out[name] = 'blocked: ' + e.message; } }
  const read = async (r) => 'read ' + r.status + ': ' + (await r.text()).slice(0, 300);
  // The control: this page's own origin answers, so a blocked request below is the browser's refusal.
  await tryIt('control', async () => (await (await fetch('data.txt')).text()).trim());
  await tryIt('console', async () => read(await fetch(CONSOLE + '/console/', { credentials: 'include' })));
  await tryIt('list', async () => read(await fetch(CONSOLE + '/console/api/sandboxes', { credentials: 'include' })));
  await tryIt('delete', async () => 'sent ' + (await fetch(CONSOLE + '/console/api/sandboxes/' + VICTIM, { method: 'DELETE', credentials: 'include' })).status);
  await tryIt('stop', async () => 'sent ' + (await fetch(CONSOLE + '/console/api/sandboxes/' + VICTIM + '/stop',
    { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'Content-Type': 'text/plain' }, body: '{}' })).type);
  await tryIt('sameHost', async () => read(await fetch('/console/', { credentials: 'include' })));
  await tryIt('frame', () => new Promise((resolve) => {
    const f = document.createElement('iframe');
    f.src = CONSOLE + '/console/';
    f.onload = () => { try { resolve('read: ' + f.contentDocument.body.innerText.slice(0, 300)); } catch (e) { resolve('blocked: ' + e.message); } };
    document.body.appendChild(f);
    setTimeout(() => resolve('no load'), 20000);
  }));
  window.attackResult = out;
})();
</script>
`, consoleBase, victim)
}

// TestCaddyfileExampleInBrowser runs the real binary on the unmodified Caddyfile.example (only ports, the namespace
// and the ticket secret come from the environment) and walks every flow the README promises: the curl tour on
// Bay's port (the README's own commands), then in Chromium the terminal from the API's ticket URL (type, read
// back, resize, reconnect), console login with the key from credentials.json and create, the console's App button
// and the API's app ticket URL on the content origin (HTTP and WebSocket), the desktop of a browser sandbox with
// a write and a read ticket, and Playwright's connectOverCDP on the API's CDP URL. And the origin rule: an HTML
// page a sandbox serves, opened by the logged-in operator, cannot read or drive the console; an HTML file of the
// workspace opened through a files ticket is a download.
func TestCaddyfileExampleInBrowser(t *testing.T) {
	testenv.Integration(t)
	testenv.ShippedImage(t, "base")
	testenv.ShippedImage(t, "browser")
	testenv.Runsc(t) // the example's python-isolated profile: the gateway refuses to start without runsc
	example, err := os.ReadFile("Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique("sgexbrowser")
	testenv.RemoveNamespace(t, ns)
	httpsPort, bayPort := testenv.FreePort(t), testenv.FreePort(t)
	g := testenv.StartGateway(t, string(example), testenv.GatewayOptions{Env: []string{
		fmt.Sprintf("SANDGATE_HTTP_PORT=%d", testenv.FreePort(t)),
		fmt.Sprintf("SANDGATE_HTTPS_PORT=%d", httpsPort),
		fmt.Sprintf("SANDGATE_BAY_PORT=%d", bayPort),
		"SANDGATE_NAMESPACE=" + ns,
		"SANDGATE_TICKET_SECRET=example-browser-test-secret-32-bytes-long",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	https := g.HTTPSClient(t, ctx, 5*time.Second)
	https.Transport.(*http.Transport).DialContext = dialLocalhost
	https.Timeout = 2 * time.Minute
	base := fmt.Sprintf("https://localhost:%d", httpsPort)
	testenv.WaitOK(t, ctx, https, base+"/health")

	var creds struct {
		APIKey string `json:"api_key"`
	}
	b, err := os.ReadFile(filepath.Join(g.DataDir, "sandgate", "credentials.json"))
	if err != nil || json.Unmarshal(b, &creds) != nil || creds.APIKey == "" {
		t.Fatalf("credentials.json %s: %v", b, err)
	}
	bay := client.New(fmt.Sprintf("http://127.0.0.1:%d", bayPort), creds.APIKey)

	// The README's curl tour, its own commands; only Bay's port and the data dir (through HOME) differ.
	tour := runReadmeTour(t, ctx, g, bayPort, "python-default")
	t.Logf("README tour:\n%s", tour)
	m := regexp.MustCompile(`(?m)^SANDBOX=(\S+)$`).FindStringSubmatch(tour)
	if m == nil {
		t.Fatalf("the tour made no sandbox:\n%s", tour)
	}
	id := m[1]
	for _, want := range []string{"Linux", "42"} {
		if !strings.Contains(tour, want) {
			t.Errorf("the tour's output lacks %q", want)
		}
	}
	termURL := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(base) + `/sandboxes/` + id + `/terminal/\?ticket=\S+$`).FindString(tour)
	if termURL == "" {
		t.Fatalf("the tour printed no terminal URL on %s:\n%s", base, tour)
	}

	// The tour started python's http.server on the app port and printed the app's ticket URL on the content origin.
	appPrefix := func(sandbox string) string {
		return fmt.Sprintf("https://%s.sandbox.localhost:%d/?ticket=", sandbox, httpsPort)
	}
	tourApp := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(appPrefix(id)) + `\S+$`).FindString(tour)
	if tourApp == "" {
		t.Fatalf("the tour printed no app URL on the content origin %s:\n%s", appPrefix(id), tour)
	}

	// The README's "same calls with python-isolated": the tour again on the gVisor profile; uname -a reads gVisor's
	// kernel, the Python cell answers, and its terminal URL opens in the browser below.
	isoTour := runReadmeTour(t, ctx, g, bayPort, "python-isolated")
	t.Logf("README tour on python-isolated:\n%s", isoTour)
	m = regexp.MustCompile(`(?m)^SANDBOX=(\S+)$`).FindStringSubmatch(isoTour)
	if m == nil {
		t.Fatalf("the isolated tour made no sandbox:\n%s", isoTour)
	}
	isoID := m[1]
	for _, want := range []string{"gvisor", "42"} {
		if !strings.Contains(isoTour, want) {
			t.Errorf("the isolated tour's output lacks %q", want)
		}
	}
	if sb, err := bay.GetSandbox(ctx, isoID); err != nil || sb.Profile != "python-isolated" {
		t.Fatalf("the isolated tour's sandbox: %v %+v", err, sb)
	}
	isoTermURL := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(base) + `/sandboxes/` + isoID + `/terminal/\?ticket=\S+$`).FindString(isoTour)
	if isoTermURL == "" {
		t.Fatalf("the isolated tour printed no terminal URL on %s:\n%s", base, isoTour)
	}

	// A browser sandbox for the desktop and CDP (the README's other profile).
	desk, err := bay.CreateSandbox(ctx, "browser-python", 1800)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bay.WaitReady(ctx, desk.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	// The app: a page, a file and the attack page in another python-default sandbox, served on its app port.
	appSB, err := bay.CreateSandbox(ctx, "python-default", 1800)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bay.WaitReady(ctx, appSB.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	tourID := id
	id = appSB.ID
	if res, err := bay.Shell(ctx, id, "mkdir -p /workspace/app", 30); err != nil || res.ExitCode != 0 {
		t.Fatalf("mkdir: %v %+v", err, res)
	}
	for name, body := range map[string]string{
		"index.html":  exampleAppHTML,
		"data.txt":    "from-the-sandbox\n",
		"attack.html": exampleAttackHTML(base, desk.ID),
	} {
		if err := bay.WriteFile(ctx, id, "app/"+name, body); err != nil {
			t.Fatalf("writing %s: %v", name, err)
		}
	}
	testenv.StartWSEcho(t, testenv.ContainerOf(t, ns, id), "9000", "-root", "/workspace/app")
	ticket := func(sandbox, scope, perm string) string {
		t.Helper()
		var tk struct {
			URL string `json:"url"`
		}
		if err := bay.Do(ctx, http.MethodPost, "/v1/sandboxes/"+sandbox+"/tickets",
			map[string]any{"scope": scope, "permission": perm, "ttl": 900}, &tk); err != nil || tk.URL == "" {
			t.Fatalf("%s ticket: %v %+v", scope, err, tk)
		}
		return tk.URL
	}
	// The API's app URLs are on the content origin; each app answers there once its server listens (the tour's
	// URL first, then fresh tickets: a ticket is spent even when the server was not up yet).
	waitApp := func(sandbox, first, want string) {
		t.Helper()
		for u := first; ; u = ticket(sandbox, "app", "read") {
			if !strings.HasPrefix(u, appPrefix(sandbox)) {
				t.Fatalf("app ticket URL %q is not on the content origin %s", u, appPrefix(sandbox))
			}
			resp, err := https.Get(u)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
					if csp := resp.Header.Get("Content-Security-Policy"); csp != "" {
						t.Errorf("the content origin added a CSP to the app: %q", csp)
					}
					return
				}
				err = fmt.Errorf("%s: %.200s", resp.Status, body)
			}
			if ctx.Err() != nil {
				t.Fatalf("the app of %s never answered on the content origin: %v", sandbox, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	waitApp(tourID, tourApp, "Directory listing")
	// The isolated tour's app: python's http.server behind gVisor's network stack, on the content origin.
	isoApp := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(appPrefix(isoID)) + `\S+$`).FindString(isoTour)
	if isoApp == "" {
		t.Fatalf("the isolated tour printed no app URL on the content origin %s:\n%s", appPrefix(isoID), isoTour)
	}
	waitApp(isoID, isoApp, "Directory listing")
	waitApp(id, ticket(id, "app", "read"), "sandbox app")
	// A workspace file through a files ticket on the console's origin is a download, never a page.
	filesURL := ticket(id, "files", "read") + "&path=" + url.QueryEscape("/workspace/app/attack.html")
	resp, err := https.Get(filesURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cd := resp.Header.Get("Content-Disposition"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(cd, "attachment") ||
		!strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("workspace HTML on the console's origin: %s, Content-Disposition %q, CSP %q", resp.Status, cd,
			resp.Header.Get("Content-Security-Policy"))
	}

	shots := filepath.Join(testenv.RepoRoot(), "build", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := testenv.RunNode(t, filepath.Join(testenv.RepoRoot(), "testdata", "example_browser.cjs"),
		"BASE="+base, "KEY="+creds.APIKey, "SCREENSHOTS="+shots,
		"TERMINAL_URL="+termURL,
		"ISOLATED_TERMINAL_URL="+isoTermURL,
		"APP_SANDBOX="+id,
		"KNOWN="+strings.Join([]string{tourID, isoID, id, desk.ID}, ","),
		"APP_URL="+ticket(id, "app", "read"),
		"FILES_URL="+ticket(id, "files", "read")+"&path="+url.QueryEscape("/workspace/app/attack.html"),
		"DESKTOP_URL="+ticket(desk.ID, "vnc", "write"),
		"VIEW_URL="+ticket(desk.ID, "vnc", "read"),
		"CDP_URL="+ticket(desk.ID, "cdp", "write"),
		"NODE_EXTRA_CA_CERTS="+g.RootCAPath(),
	)
	if err != nil {
		t.Fatalf("browser: %v\n%s\ngateway log tail:\n%s", err, out, tailString(g.Logs(), 4000))
	}
	t.Logf("browser:\n%s", out)
	_, res, _ := strings.Cut(out, "RESULT ")
	res, _, _ = strings.Cut(res, "\n")
	var r struct {
		Terminal struct{ First, Second string }
		Isolated struct {
			Release string // uname -r typed in the isolated sandbox's terminal
			Option  string // the console's profile list entry for python-isolated
			Runtime string // and its data-runtime
			Created string // the sandbox the console created from it
		}
		Created    string
		ConsoleApp struct {
			URL string
			Res map[string]string
		}
		App      map[string]string
		Attack   map[string]string
		Download struct {
			Name string
			Nav  string
			Ran  bool
		}
		Desktop struct {
			Lit       int
			ViewOnly  bool
			ViewState string
			Mode      string
		}
		CDP struct{ Text, Title string }
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatalf("result %q: %v", res, err)
	}
	t.Run("terminal", func(t *testing.T) {
		if r.Terminal.First == "" || r.Terminal.First == r.Terminal.Second {
			t.Errorf("resize: %+v", r.Terminal)
		}
	})
	t.Run("console create", func(t *testing.T) {
		sb, err := bay.GetSandbox(ctx, r.Created)
		if err != nil || sb.Profile != "python-default" {
			t.Errorf("the console's sandbox %q: %v %+v", r.Created, err, sb)
		}
	})
	t.Run("isolated", func(t *testing.T) {
		t.Logf("isolated: %+v", r.Isolated)
		if !strings.Contains(r.Isolated.Release, "gvisor") {
			t.Errorf("uname -r in the isolated sandbox's terminal: %q", r.Isolated.Release)
		}
		if r.Isolated.Runtime != "runsc" || !strings.Contains(r.Isolated.Option, "gVisor") {
			t.Errorf("the console's python-isolated entry: %q (runtime %q)", r.Isolated.Option, r.Isolated.Runtime)
		}
		sb, err := bay.GetSandbox(ctx, r.Isolated.Created)
		if err != nil || sb.Profile != "python-isolated" || sb.Status != "ready" {
			t.Errorf("the console's isolated sandbox %q: %v %+v", r.Isolated.Created, err, sb)
		}
		if res, err := bay.Shell(ctx, r.Isolated.Created, "uname -r", 30); err != nil || !strings.Contains(res.Output, "gvisor") {
			t.Errorf("uname -r in the console's isolated sandbox: %v %+v", err, res)
		}
	})
	wantApp := map[string]string{"http": "from-the-sandbox", "ws": "ping-from-the-sandbox",
		"origin": fmt.Sprintf("https://%s.sandbox.localhost:%d", id, httpsPort)}
	t.Run("app", func(t *testing.T) {
		for k, v := range wantApp {
			if r.App[k] != v || r.ConsoleApp.Res[k] != v {
				t.Errorf("%s: ticket URL %q, console's App %q, want %q", k, r.App[k], r.ConsoleApp.Res[k], v)
			}
		}
		if !strings.HasPrefix(r.ConsoleApp.URL, wantApp["origin"]+"/") {
			t.Errorf("the console opened the app at %s", r.ConsoleApp.URL)
		}
	})
	t.Run("origin attack", func(t *testing.T) {
		t.Logf("attack page: %v", r.Attack)
		if r.Attack["control"] != "from-the-sandbox" {
			t.Errorf("the attack page's own fetch failed: %q", r.Attack["control"])
		}
		for _, k := range []string{"console", "list", "delete", "frame"} {
			if !strings.HasPrefix(r.Attack[k], "blocked") {
				t.Errorf("%s: %q", k, r.Attack[k])
			}
		}
		if s := r.Attack["sameHost"]; s == "" || regexp.MustCompile(`(?i)api key|csrf|console`).MatchString(s) {
			t.Errorf("/console/ on the content origin: %q", s)
		}
		sb, err := bay.GetSandbox(ctx, desk.ID)
		if err != nil || sb.Status != "ready" {
			t.Errorf("the victim sandbox after the attack: %v %+v", err, sb)
		}
		if r.Download.Ran || r.Download.Name != "attack.html" {
			t.Errorf("workspace HTML through a files ticket: %+v", r.Download)
		}
	})
	t.Run("desktop", func(t *testing.T) {
		if r.Desktop.Lit < 1000 {
			t.Errorf("canvas: %+v", r.Desktop)
		}
		// The read ticket opens the view-only page; whether its stream connects is the RFB filter's business.
		if !r.Desktop.ViewOnly || r.Desktop.Mode != "view only" {
			t.Errorf("read ticket: %+v", r.Desktop)
		}
	})
	t.Run("cdp", func(t *testing.T) {
		if r.CDP.Text != "over cdp" || r.CDP.Title != "driven" {
			t.Errorf("connectOverCDP: %+v", r.CDP)
		}
	})
}

// runReadmeTour runs the shell blocks of the README's "A first sandbox" as written, with Bay's port moved and HOME
// pointing at a home whose ~/.local/share is the gateway's XDG data home; it prints the sandbox id at the end.
func runReadmeTour(t *testing.T, ctx context.Context, g *testenv.Gateway, bayPort int, profile string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## A first sandbox")
	if !ok {
		t.Fatal("README has no section \"A first sandbox\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var script strings.Builder
	for rest := section; ; {
		_, block, ok := strings.Cut(rest, "```sh\n")
		if !ok {
			break
		}
		block, rest, _ = strings.Cut(block, "```")
		script.WriteString(block)
	}
	if !strings.Contains(script.String(), "127.0.0.1:8114") {
		t.Fatalf("README's first sandbox commands not found or not on Bay's port:\n%s", section)
	}
	script.WriteString("echo SANDBOX=$id\n")
	cmdText := strings.ReplaceAll(script.String(), "127.0.0.1:8114", fmt.Sprintf("127.0.0.1:%d", bayPort))
	// The README's "the same calls with" another profile: its create names python-default.
	const written = `"profile":"python-default"`
	if profile != "python-default" {
		if !strings.Contains(cmdText, written) {
			t.Fatalf("the README's create does not name %s:\n%s", written, cmdText)
		}
		cmdText = strings.ReplaceAll(cmdText, written, `"profile":"`+profile+`"`)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(g.DataDir), filepath.Join(home, ".local", "share")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", cmdText)
	cmd.Env = append(os.Environ(), "HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's commands failed: %v\n%s", err, out)
	}
	return string(out)
}

// dialLocalhost dials *.localhost on loopback, as browsers and curl resolve it.
func dialLocalhost(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
