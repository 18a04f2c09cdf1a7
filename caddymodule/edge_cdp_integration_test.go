package caddymodule_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// playwrightScript connects over CDP to CDP_URL, drives a page and closes the connection (which sends
// Browser.close: the gateway's filter must keep the shared browser alive).
const playwrightScript = `
const { chromium } = require('playwright-core');
(async () => {
  const browser = await chromium.connectOverCDP(process.env.CDP_URL, { timeout: 60000 });
  const context = browser.contexts()[0] || await browser.newContext();
  const page = await context.newPage();
  await page.setContent('<title>sandgate</title><p id="x">' + (6 * 7) + '</p>');
  const text = await page.textContent('#x');
  console.log(JSON.stringify({ title: await page.title(), text, ua: await page.evaluate(() => navigator.userAgent) }));
  await page.close();
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
`

// playwrightCore returns the repository's node_modules (git-ignored), installing playwright-core there if needed.
func playwrightCore(t *testing.T) string {
	t.Helper()
	root := testenv.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "node_modules", "playwright-core")); err == nil {
		return root
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed")
	}
	cmd := exec.Command("npm", "install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "playwright-core")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install playwright-core: %v\n%s", err, out)
	}
	return root
}

// TestEdgePlaywrightOverCDP: Playwright's connectOverCDP against wss://.../sandboxes/{id}/cdp drives a page in the
// sandbox's Chromium; /cdp/json/version shows the external wss:// URL; Browser.close from the client does not kill
// the shared browser.
func TestEdgePlaywrightOverCDP(t *testing.T) {
	nodeRoot := playwrightCore(t)
	e := startEdgeBrowser(t)
	id := e.createSandbox(t)
	e.get(t, e.client, "/sandboxes/"+id+"/app/8000/?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil)
	agentURL, token := e.agentOf(t, id)
	requireAgentRoute(t, agentURL, token, "/cdp/json/version", "agent-extras")

	// Discovery shows the URL clients must use, rewritten from X-Forwarded-Proto/Host/Prefix.
	var version struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		status, body, _ := e.get(t, e.client, "/sandboxes/"+id+"/cdp/json/version?ticket="+e.ticket(t, id, tickets.KindCDP, tickets.PermRead), nil)
		if status == http.StatusOK && json.Unmarshal([]byte(body), &version) == nil && version.WS != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/json/version: %d %s", status, body)
		}
		time.Sleep(time.Second) // Chromium starts with the sandbox
	}
	wantPrefix := strings.Replace(e.base, "https://", "wss://", 1) + "/sandboxes/" + id + "/cdp/"
	if !strings.HasPrefix(version.WS, wantPrefix) {
		t.Fatalf("webSocketDebuggerUrl %q, want it under %s", version.WS, wantPrefix)
	}

	caPath, _ := e.g.WaitRootCA(t.Context())
	for i := range 2 { // the second run proves the first one's Browser.close was filtered
		cdpURL := strings.Replace(e.base, "https://", "wss://", 1) + "/sandboxes/" + id + "/cdp?ticket=" + e.ticket(t, id, tickets.KindCDP, tickets.PermWrite)
		cmd := exec.Command("node", "-e", playwrightScript)
		cmd.Dir = nodeRoot
		cmd.Env = append(os.Environ(), "CDP_URL="+cdpURL, "NODE_EXTRA_CA_CERTS="+caPath)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("playwright run %d: %v\n%s", i, err, out)
		}
		var got struct{ Title, Text, UA string }
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if json.Unmarshal([]byte(lines[len(lines)-1]), &got) != nil || got.Title != "sandgate" || got.Text != "42" {
			t.Fatalf("playwright run %d printed %s", i, out)
		}
	}

	// A message over the route's max_message (1MiB) is closed with 1009 by the agent, on the gateway's word.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(e.base, "https://", "wss://", 1)+"/sandboxes/"+id+"/cdp?ticket="+e.ticket(t, id, tickets.KindCDP, tickets.PermWrite),
		&websocket.DialOptions{HTTPClient: e.client})
	if err != nil {
		t.Fatalf("raw CDP WebSocket: %v", err)
	}
	defer c.CloseNow()
	big := `{"id":1,"method":"Runtime.evaluate","params":{"expression":"'` + strings.Repeat("x", 2<<20) + `'"}}`
	_ = c.Write(ctx, websocket.MessageText, []byte(big))
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
				t.Fatalf("oversized CDP message: %v, want close 1009", err)
			}
			break
		}
	}
}
