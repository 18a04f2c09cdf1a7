package main_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// tokenTransport adds the agent token to every request, as the gateway does.
type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(agentapi.TokenHeader, t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCP talks to /mcp with the real go-sdk client over Streamable HTTP.
func TestMCP(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"shell"}})
	ctx := testCtx(t)

	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: sb.URL + "/mcp", HTTPClient: &http.Client{Transport: tokenTransport{sb.Token}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	// The core tools, plus python_exec from the Python capability; browser_* tools only run with a browser.
	if strings.Join(names, ",") != "bash,edit,glob,grep,python_exec,read,write" {
		t.Fatalf("tools: %v", names)
	}

	call := func(name string, args map[string]any, withProgress bool) (*mcp.CallToolResult, string) {
		t.Helper()
		params := &mcp.CallToolParams{Name: name, Arguments: args}
		if withProgress {
			params.SetProgressToken("tok-" + name)
		}
		res, err := session.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return res, b.String()
	}

	t.Run("bash with progress", func(t *testing.T) {
		res, out := call("bash", map[string]any{"command": "echo start; sleep 6; echo done; echo warn >&2; exit 4"}, true)
		if res.IsError || !strings.Contains(out, "start\ndone\n") || !strings.Contains(out, "[stderr]\nwarn") || !strings.Contains(out, "exit code 4") {
			t.Fatalf("bash: %v %q", res.IsError, out)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(progress) == 0 || !strings.Contains(progress[0], "running for") {
			t.Fatalf("no progress notifications during a 6 s call: %v", progress)
		}
	})

	t.Run("bash output keeps head and tail", func(t *testing.T) {
		res, out := call("bash", map[string]any{"command": "echo FIRST; seq 1 100000; echo LAST"}, false)
		if res.IsError || !strings.HasPrefix(out, "FIRST\n") || !strings.Contains(out, "LAST\n") || !strings.Contains(out, "bytes omitted") ||
			!strings.Contains(out, "/v1/processes/proc_") || len(out) > 40<<10 {
			t.Fatalf("truncation: len %d\n%.300s", len(out), out)
		}
	})

	t.Run("bash timeout", func(t *testing.T) {
		_, out := call("bash", map[string]any{"command": "sleep 60", "timeout_ms": 300}, false)
		if !strings.Contains(out, "timed out") {
			t.Fatalf("%q", out)
		}
	})

	t.Run("write, read, edit, glob, grep", func(t *testing.T) {
		if res, out := call("write", map[string]any{"path": "m/a.txt", "content": "alpha\nbeta\ngamma\n"}, false); res.IsError {
			t.Fatal(out)
		}
		if _, out := call("read", map[string]any{"path": "m/a.txt", "offset": 2, "limit": 1}, false); !strings.Contains(out, "     2\tbeta\n") || strings.Contains(out, "gamma") {
			t.Fatalf("read: %q", out)
		}
		if res, out := call("edit", map[string]any{"path": "m/a.txt", "old_string": "beta", "new_string": "BETA"}, false); res.IsError || !strings.Contains(out, "replaced 1") {
			t.Fatalf("edit: %q", out)
		}
		if res, out := call("edit", map[string]any{"path": "m/a.txt", "old_string": "nope", "new_string": "x"}, false); !res.IsError || !strings.Contains(out, "not found") {
			t.Fatalf("edit of missing text must be a tool error: %q", out)
		}
		if _, out := call("glob", map[string]any{"pattern": "**/*.txt"}, false); out != "m/a.txt" {
			t.Fatalf("glob: %q", out)
		}
		if _, out := call("grep", map[string]any{"pattern": "BETA"}, false); out != "m/a.txt:2:BETA\n" {
			t.Fatalf("grep: %q", out)
		}
		if res, out := call("read", map[string]any{"path": "../etc/passwd"}, false); !res.IsError || !strings.Contains(out, "outside the workspace") {
			t.Fatalf("escape must be a tool error: %q", out)
		}
	})

	t.Run("unknown session gets 404, no token gets 401", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		for _, tc := range []struct {
			token string
			want  int
		}{{sb.Token, http.StatusNotFound}, {"", http.StatusUnauthorized}} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sb.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", "no-such-session")
			if tc.token != "" {
				req.Header.Set(agentapi.TokenHeader, tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("token %q: status %d, want %d", tc.token, resp.StatusCode, tc.want)
			}
		}
	})
}
