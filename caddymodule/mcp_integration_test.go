package caddymodule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

const (
	mcpKeyAlice = "mcp-test-key-alice-0123456789"
	mcpKeyBob   = "mcp-test-key-bob-0123456789"
)

// startMCPGateway runs the gateway with the API (and its MCP server at /mcp), the pages, tickets and the sandbox
// proxy on one HTTPS site, as Caddyfile.example's API site does.
func startMCPGateway(t *testing.T) *edgeGateway {
	t.Helper()
	site := fmt.Sprintf(`	sandbox_api {
		key %s alice
		key %s bob
		mcp
	}
	sandbox_pages {
		api_keys
	}
	sandbox_ticket /sandboxes/* {
		api_keys
	}
	sandbox_proxy /sandboxes/* terminal pty vnc cdp files mcp`, mcpKeyAlice, mcpKeyBob)
	return startEdgeWithProfiles(t, site, "")
}

// mcpResult is what testdata/mcp_client.cjs reports.
type mcpResult struct {
	WrongKey string   `json:"wrongKey"`
	Tools    []string `json:"tools"`
	SchemaOK bool     `json:"schemaOK"`
	ID       string   `json:"id"`
	State    string   `json:"state"`
	Image    *struct {
		MIMEType string `json:"mimeType"`
		PNGMagic string `json:"pngMagic"`
	} `json:"image"`
	Raised struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"raised"`
	Shell struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	} `json:"shell"`
	Long struct {
		Exit     int    `json:"exit"`
		Stdout   string `json:"stdout"`
		Progress int    `json:"progress"`
	} `json:"long"`
	Read     string   `json:"read"`
	Listed   []string `json:"listed"`
	Found    []string `json:"found"`
	Transfer struct {
		Size       int    `json:"size"`
		Copy       string `json:"copy"`
		Unexported string `json:"unexported"`
	} `json:"transfer"`
	Escape       codeSeen `json:"escape"`
	BadArgs      codeSeen `json:"badArgs"`
	TicketURL    string   `json:"ticketURL"`
	TerminalPage struct {
		Status      int  `json:"status"`
		HasTerminal bool `json:"hasTerminal"`
	} `json:"terminalPage"`
	TicketReuse int      `json:"ticketReuse"`
	OtherSees   bool     `json:"otherSees"`
	OtherRun    codeSeen `json:"otherRun"`
	OtherDelete bool     `json:"otherDelete"`
	MineSees    bool     `json:"mineSees"`
	AfterDelete bool     `json:"afterDelete"`
}

type codeSeen struct {
	IsError bool   `json:"isError"`
	Code    string `json:"code"`
}

func runMCPClient(t *testing.T, e *edgeGateway, mode string) mcpResult {
	t.Helper()
	dir := t.TempDir()
	keyFile := func(name, key string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := filepath.Join(testenv.RepoRoot(), "caddymodule", "testdata", "mcp_client.cjs")
	out, err := testenv.RunNode(t, script,
		"MODE="+mode, "BASE="+e.base, "PROFILE=py",
		"KEY="+mcpKeyAlice, "OTHER_KEY="+mcpKeyBob,
		"KEY_FILE="+keyFile("alice", mcpKeyAlice), "OTHER_KEY_FILE="+keyFile("bob", mcpKeyBob),
		"BAD_KEY_FILE="+keyFile("bad", "sk-wrong-key"),
		"CADDY="+testenv.CaddyBinary(t),
		"NODE_EXTRA_CA_CERTS="+e.g.RootCAPath(), "SSL_CERT_FILE="+e.g.RootCAPath())
	if err != nil {
		t.Fatalf("MCP client (%s): %v\n%s\ngateway log tail:\n%s", mode, err, out, tail(e.g.Logs(), 4000))
	}
	_, res, ok := strings.Cut(out, "RESULT ")
	if !ok {
		t.Fatalf("MCP client (%s) printed no result:\n%s", mode, out)
	}
	res, _, _ = strings.Cut(res, "\n")
	var r mcpResult
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatalf("MCP client result %q: %v", res, err)
	}
	return r
}

func checkMCPFlow(t *testing.T, r mcpResult) {
	t.Helper()
	for _, want := range []string{"create_sandbox", "list_sandboxes", "stop_sandbox", "delete_sandbox", "run_code",
		"run_command", "run_long_command", "read_file", "write_file", "edit_file", "list_files", "search_files",
		"import_file", "export_files", "open_in_browser", "browser_navigate", "browser_screenshot", "browser_evaluate",
		"browser_text"} {
		if !slices.Contains(r.Tools, want) {
			t.Errorf("tools/list lacks %s: %v", want, r.Tools)
		}
	}
	if !r.SchemaOK {
		t.Errorf("a tool lacks an object input schema or a description")
	}
	if !strings.HasPrefix(r.WrongKey, "refused") {
		t.Errorf("a wrong key: %s", r.WrongKey)
	}
	if strings.TrimSpace(r.State) != "42" {
		t.Errorf("python state across calls: %q, want 42", r.State)
	}
	if r.Image == nil || r.Image.MIMEType != "image/png" || r.Image.PNGMagic != "PNG" {
		t.Errorf("matplotlib plot: %+v", r.Image)
	}
	if !r.Raised.IsError || !strings.Contains(r.Raised.Text, "boom") {
		t.Errorf("a raising cell: %+v", r.Raised)
	}
	if r.Shell.ExitCode != 0 || r.Shell.Stdout != "hello\nLinux\n" {
		t.Errorf("shell: %+v", r.Shell)
	}
	if r.Long.Exit != 0 || !strings.Contains(r.Long.Stdout, "step 4") || r.Long.Progress < 1 {
		t.Errorf("long command: %+v", r.Long)
	}
	if r.Read != "hello from mcp\nedited line\n" || !slices.Contains(r.Listed, "hello.txt") || !slices.Contains(r.Found, "notes/hello.txt:2") {
		t.Errorf("file round trip: read %q, listed %v, found %v", r.Read, r.Listed, r.Found)
	}
	if r.Transfer.Copy != "hello from mcp\nedited line\n" || r.Transfer.Size != len(r.Transfer.Copy) || r.Transfer.Unexported != "forbidden" {
		t.Errorf("export and import between sandboxes: %+v", r.Transfer)
	}
	if !r.Escape.IsError || r.Escape.Code != "invalid_path" {
		t.Errorf("a path escaping the workspace: %+v", r.Escape)
	}
	if !r.BadArgs.IsError || r.BadArgs.Code != "validation_error" {
		t.Errorf("bad arguments: %+v", r.BadArgs)
	}
	if r.TerminalPage.Status != http.StatusOK || !r.TerminalPage.HasTerminal {
		t.Errorf("ticket URL %s: %+v", r.TicketURL, r.TerminalPage)
	}
	if r.TicketReuse != http.StatusUnauthorized {
		t.Errorf("the ticket URL opened twice: %d", r.TicketReuse)
	}
	if r.OtherSees || !r.OtherRun.IsError || r.OtherRun.Code != "not_found" || !r.MineSees {
		t.Errorf("another owner: sees %v, run %+v, owner still sees it after the other's delete: %v", r.OtherSees, r.OtherRun, r.MineSees)
	}
	if r.AfterDelete {
		t.Errorf("the sandbox is still listed after delete_sandbox")
	}
}

// TestMCPServer drives the gateway's /mcp with the official TypeScript MCP client, over HTTPS and through the stdio
// bridge, against real sandbox containers.
func TestMCPServer(t *testing.T) {
	testenv.Integration(t)
	e := startMCPGateway(t)

	t.Run("streamable http", func(t *testing.T) {
		r := runMCPClient(t, e, "http")
		t.Logf("tools: %v; long command progress notifications: %d", r.Tools, r.Long.Progress)
		checkMCPFlow(t, r)
	})
	t.Run("stdio bridge", func(t *testing.T) {
		checkMCPFlow(t, runMCPClient(t, e, "stdio"))
	})

	t.Run("unknown session is 404", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+mcpKeyAlice)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", "no-such-session")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unknown session id: %s, want 404", resp.Status)
		}
	})

	t.Run("session survives reload", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		hc := &http.Client{Transport: bearerRT{key: mcpKeyAlice, next: e.client.Transport}}
		client := mcp.NewClient(&mcp.Implementation{Name: "reload-test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.base + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_profiles"}); err != nil {
			t.Fatal(err)
		}
		// A reload that changes a setting of the API site provisions a new sandbox_api.
		changed := strings.Replace(e.caddyfile, "sandbox_api {", "sandbox_api {\n\t\tmax_upload 512m", 1)
		if err := e.g.Reload(changed); err != nil {
			t.Fatal(err)
		}
		// The old server closes its idle connections as it hands over; the session is what must survive, so the
		// next call goes over a fresh connection rather than racing that close.
		e.client.Transport.(*http.Transport).CloseIdleConnections()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_sandboxes", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("the session did not survive the reload: %v", err)
		}
		if res.IsError {
			t.Fatalf("list_sandboxes after the reload: %+v", res.Content)
		}
	})
}

type bearerRT struct {
	key  string
	next http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// TestMCPPassthrough reaches one sandbox's own agent MCP server through the gateway at /sandboxes/{id}/mcp with the
// official TypeScript client: with its owner's API key and with an mcp ticket; without either, or with another
// owner's key, it is refused.
func TestMCPPassthrough(t *testing.T) {
	testenv.Integration(t)
	e := startMCPGateway(t)
	api := func(method, path, key, body string, out any) {
		t.Helper()
		req, _ := http.NewRequest(method, e.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s", method, path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	var sb struct {
		ID string `json:"id"`
	}
	api(http.MethodPost, "/v1/sandboxes", mcpKeyAlice, `{"profile":"py"}`, &sb)
	var tk struct {
		Ticket string `json:"ticket"`
	}
	api(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/tickets", mcpKeyAlice, `{"scope":"mcp","permission":"write","ttl":120}`, &tk)

	script := filepath.Join(testenv.RepoRoot(), "caddymodule", "testdata", "mcp_client.cjs")
	out, err := testenv.RunNode(t, script, "MODE=passthrough", "BASE="+e.base, "SANDBOX="+sb.ID, "TICKET="+tk.Ticket,
		"KEY="+mcpKeyAlice, "OTHER_KEY="+mcpKeyBob, "NODE_EXTRA_CA_CERTS="+e.g.RootCAPath())
	if err != nil {
		t.Fatalf("MCP passthrough client: %v\n%s\ngateway log tail:\n%s", err, out, tail(e.g.Logs(), 4000))
	}
	_, res, _ := strings.Cut(out, "RESULT ")
	res, _, _ = strings.Cut(res, "\n")
	var r struct {
		WithKey, WithTicket, Without, OtherOwner json.RawMessage
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatalf("result %q: %v\n%s", res, err, out)
	}
	t.Logf("agent tools through the gateway: %s", r.WithKey)
	for name, got := range map[string]json.RawMessage{"API key": r.WithKey, "mcp ticket": r.WithTicket} {
		var tools []string
		if err := json.Unmarshal(got, &tools); err != nil || !slices.Contains(tools, "bash") || !slices.Contains(tools, "read") {
			t.Errorf("with an %s: %s, want the agent's tools (bash, read, ...)", name, got)
		}
	}
	for name, got := range map[string]json.RawMessage{"no credential": r.Without, "another owner's key": r.OtherOwner} {
		if !strings.HasPrefix(strings.Trim(string(got), `"`), "refused") {
			t.Errorf("with %s: %s, want refused", name, got)
		}
	}
}
