package caddymodule_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

const pagesConsoleKey = "pages-console-key-for-tests"

// runBrowserStep runs one step of testdata/pages_browser.cjs in Chromium and decodes its RESULT line into out.
func runBrowserStep(t *testing.T, e *edgeGateway, step string, out any, env ...string) {
	t.Helper()
	shots := filepath.Join(testenv.RepoRoot(), "build", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(testenv.RepoRoot(), "caddymodule", "testdata", "pages_browser.cjs")
	env = append(env, "STEP="+step, "BASE="+e.base, "CONSOLE_KEY="+pagesConsoleKey, "SCREENSHOTS="+shots,
		fmt.Sprintf("STEP_DEADLINE=%d", stepDeadline(t).UnixMilli()))
	output, err := testenv.RunNode(t, script, env...)
	if err != nil {
		t.Fatalf("browser step %s: %v\n%s\ngateway log tail:\n%s", step, err, output, tail(e.g.Logs(), 3000))
	}
	_, res, ok := strings.Cut(output, "RESULT ")
	if !ok {
		t.Fatalf("browser step %s printed no result:\n%s", step, output)
	}
	res, _, _ = strings.Cut(res, "\n")
	if err := json.Unmarshal([]byte(res), out); err != nil {
		t.Fatalf("browser step %s result %q: %v", step, res, err)
	}
}

// stepDeadline is when a browser step gives up waiting: shortly before the test binary's own deadline (go test
// -timeout), so a slow machine only makes the steps slower, and a hang still ends with the step's own message rather
// than the test binary's panic. Without a deadline, 15 minutes.
func stepDeadline(t *testing.T) time.Time {
	if d, ok := t.Deadline(); ok {
		return d.Add(-time.Minute)
	}
	return time.Now().Add(15 * time.Minute)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestPagesInBrowser drives the console, the terminal and the desktop in Chromium against the real gateway over
// HTTPS with real sandbox containers.
func TestPagesInBrowser(t *testing.T) {
	testenv.Integration(t)
	browserImage := testenv.Image(t, "browser")
	site := fmt.Sprintf(`	sandbox_pages {
		console_key %s owner alice
		session_lifetime 2m
	}
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/* terminal pty vnc cdp files`, pagesConsoleKey)
	e := startEdgeWithProfiles(t, site, fmt.Sprintf(`
		profile desk {
			image %s
			memory 1g
			pids 512
			capabilities shell browser vnc
		}`, browserImage))

	var created struct {
		ID            string            `json:"id"`
		Usage         map[string]string `json:"usage"`
		CSPViolations []string          `json:"csp_violations"`
	}
	runBrowserStep(t, e, "create", &created, "PROFILE=py", "SHOT=console.png")
	if created.ID == "" || len(created.CSPViolations) > 0 {
		t.Fatalf("create: %+v", created)
	}
	id := created.ID
	t.Logf("sandbox %s created from the console; usage shown: %v", id, created.Usage)

	t.Run("terminal", func(t *testing.T) {
		var res struct {
			First, Second string
			ExpiredBanner string   `json:"expiredBanner"`
			CSPViolations []string `json:"csp_violations"`
		}
		runBrowserStep(t, e, "terminal", &res, "SANDBOX="+id)
		t.Logf("stty size %q -> %q after the resize; after the cookie expired: %q", res.First, res.Second, res.ExpiredBanner)
		if !strings.Contains(res.ExpiredBanner, "ticket has expired") {
			t.Errorf("expiry banner: %q", res.ExpiredBanner)
		}
		if len(res.CSPViolations) > 0 {
			t.Errorf("CSP violations: %v", res.CSPViolations)
		}
	})

	t.Run("terminal faults", func(t *testing.T) {
		// Each failure happens deterministically (Playwright drops the request or holds the WebSocket): six list
		// loads and three profile loads in the console, then once each in the terminal.
		var seen struct{ List, Profiles, Module, Session, WS int }
		runBrowserStep(t, e, "faults", &seen, "SANDBOX="+id)
		t.Logf("requests seen: %+v", seen)
		if seen.List < 7 || seen.Profiles < 4 || seen.Module < 2 || seen.Session < 2 || seen.WS < 2 {
			t.Errorf("a failure was not retried: %+v", seen)
		}
	})

	t.Run("expired ticket", func(t *testing.T) {
		// Issued by a clock an hour behind: expired (leeway included) when it is made, with no sleep.
		past, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(edgeSecret),
			Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := past.Issue(tickets.IssueRequest{SandboxID: id, Kind: tickets.KindTerminal,
			Permission: tickets.PermWrite, Lifetime: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Status  int
			Message string
		}
		runBrowserStep(t, e, "expired", &res, "URL=/sandboxes/"+id+"/terminal/?ticket="+tk.Token)
		if res.Status != http.StatusUnauthorized || !strings.Contains(res.Message, "expired") {
			t.Fatalf("expired ticket: %+v", res)
		}
	})

	t.Run("desktop", func(t *testing.T) {
		var desk struct {
			ID string `json:"id"`
		}
		runBrowserStep(t, e, "create", &desk, "PROFILE=desk")
		var res struct {
			Lit           int
			ViewOnly      bool
			ViewState     string
			Mode          string
			ViewLit       int      `json:"view_lit"`
			CSPViolations []string `json:"csp_violations"`
		}
		runBrowserStep(t, e, "desktop", &res, "SANDBOX="+desk.ID)
		t.Logf("desktop canvas: %d lit pixels; read ticket: view-only=%v (%q), stream %s, %d lit pixels", res.Lit, res.ViewOnly, res.Mode, res.ViewState, res.ViewLit)
		if !res.ViewOnly || res.Mode != "view only" {
			t.Errorf("a read ticket did not open the desktop view-only: %+v", res)
		}
		// A read ticket streams the desktop too; the agent drops the viewer's input (agentimage TestBrowserCDPAndVNC).
		if res.ViewState != "connected" || res.ViewLit <= 1000 {
			t.Errorf("read-only desktop: stream %q, %d lit pixels; want connected and a non-blank canvas", res.ViewState, res.ViewLit)
		}
		if len(res.CSPViolations) > 0 {
			t.Errorf("CSP violations: %v", res.CSPViolations)
		}
	})

	t.Run("container died", func(t *testing.T) {
		var doomed struct {
			ID string `json:"id"`
		}
		runBrowserStep(t, e, "create", &doomed, "PROFILE=py")
		var res struct{ Banner, Rebuilt string }
		runBrowserStep(t, e, "died", &res, "SANDBOX="+doomed.ID, "NAMESPACE="+e.ns)
		t.Logf("after docker kill: %q, then %q", res.Banner, res.Rebuilt)
		if !strings.Contains(res.Banner, "The sandbox died") {
			t.Errorf("death banner: %q", res.Banner)
		}
		if !strings.Contains(res.Rebuilt, "sigkill") || !strings.Contains(res.Rebuilt, "new shell") {
			t.Errorf("rebuilt banner: %q", res.Rebuilt)
		}
	})

	t.Run("delete", func(t *testing.T) {
		var res struct{ Gone bool }
		runBrowserStep(t, e, "remove", &res, "SANDBOX="+id)
		if !res.Gone {
			t.Fatal("the sandbox stayed in the list")
		}
	})
}

// startEdgeWithProfiles is startEdge with a shell profile "py" and more profiles of the caller's: a real gateway
// over HTTPS (tls internal) with a sandboxes app in a namespace of its own, removed at the end.
func startEdgeWithProfiles(t *testing.T, site, profiles string) *edgeGateway {
	t.Helper()
	e := &edgeGateway{ns: testenv.Unique("sgpages")}
	httpsPort, httpPort := testenv.FreePort(t), testenv.FreePort(t)
	e.accessLog = filepath.Join(t.TempDir(), "access.log")
	testenv.RemoveNamespace(t, e.ns)
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
			cpus 0.5
			memory 256m
			pids 128
			capabilities shell python filesystem
			app_port 3000
			idle_timeout 5m
		}%s
	}
}

https://localhost:%d {
	tls internal
%s
}
`, httpPort, httpsPort, e.ns, testenv.Image(t, "base"), profiles, httpsPort, site)
	e.serve(t, caddyfile, httpsPort, "/console/")
	return e
}
