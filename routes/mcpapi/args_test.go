package mcpapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/sandboxes/service"
)

func TestArgsValidate(t *testing.T) {
	long := strings.Repeat("a", 200)
	tests := []struct {
		name string
		args validator
		code string // "" means valid
	}{
		{"sandbox ok", sandboxArgs{SandboxID: "sbx-0123abcd"}, ""},
		{"sandbox empty", sandboxArgs{}, service.CodeValidation},
		{"sandbox slash", sandboxArgs{SandboxID: "a/../b"}, service.CodeValidation},
		{"sandbox too long", sandboxArgs{SandboxID: long}, service.CodeValidation},
		{"create defaults", createArgs{}, ""},
		{"create negative ttl", createArgs{TTLSeconds: -1}, service.CodeValidation},
		{"create bad profile", createArgs{Profile: "../x"}, service.CodeValidation},
		{"list status", listArgs{Status: "ready"}, ""},
		{"list bad status", listArgs{Status: "running"}, service.CodeValidation},
		{"code python", runCodeArgs{SandboxID: "s1", Code: "1+1"}, ""},
		{"code node", runCodeArgs{SandboxID: "s1", Language: "node", Code: "1"}, ""},
		{"code cobol", runCodeArgs{SandboxID: "s1", Language: "cobol", Code: "1"}, service.CodeValidation},
		{"code empty", runCodeArgs{SandboxID: "s1", Code: "  \n"}, service.CodeValidation},
		{"code timeout high", runCodeArgs{SandboxID: "s1", Code: "1", TimeoutSeconds: 301}, service.CodeValidation},
		{"code timeout negative", runCodeArgs{SandboxID: "s1", Code: "1", TimeoutSeconds: -5}, service.CodeValidation},
		{"command ok", commandArgs{SandboxID: "s1", Command: "ls", TimeoutSeconds: 300}, ""},
		{"command too long a timeout", commandArgs{SandboxID: "s1", Command: "ls", TimeoutSeconds: 301}, service.CodeValidation},
		{"command empty", commandArgs{SandboxID: "s1"}, service.CodeValidation},
		{"long command allows a day", longCommandArgs{SandboxID: "s1", Command: "make", TimeoutSeconds: 86400}, ""},
		{"long command not more", longCommandArgs{SandboxID: "s1", Command: "make", TimeoutSeconds: 86401}, service.CodeValidation},
		{"edit empty old", editArgs{SandboxID: "s1", Path: "a"}, service.CodeValidation},
		{"search empty pattern", searchArgs{SandboxID: "s1"}, service.CodeValidation},
		{"search limit", searchArgs{SandboxID: "s1", Pattern: "x", Limit: 10001}, service.CodeValidation},
		{"export none", exportArgs{SandboxID: "s1"}, service.CodeValidation},
		{"export ok", exportArgs{SandboxID: "s1", Paths: []string{"a.txt"}}, ""},
		{"import both", importArgs{SandboxID: "s1", FromSandbox: "s2", Path: "a", URL: "https://x"}, service.CodeValidation},
		{"import neither", importArgs{SandboxID: "s1"}, service.CodeValidation},
		{"import path without sandbox", importArgs{SandboxID: "s1", Path: "a"}, service.CodeValidation},
		{"import url", importArgs{SandboxID: "s1", URL: "https://example.com/a"}, ""},
		{"open terminal", openArgs{SandboxID: "s1", View: "terminal"}, ""},
		{"open cdp refused", openArgs{SandboxID: "s1", View: "cdp"}, service.CodeValidation},
		{"open ttl", openArgs{SandboxID: "s1", View: "app", TTLSeconds: 3601}, service.CodeValidation},
		{"navigate file", navigateArgs{SandboxID: "s1", URL: "file:///etc/passwd"}, service.CodeValidation},
		{"navigate javascript", navigateArgs{SandboxID: "s1", URL: "javascript:alert(1)"}, service.CodeValidation},
		{"navigate ok", navigateArgs{SandboxID: "s1", URL: "https://example.com"}, ""},
		{"evaluate empty", evaluateArgs{SandboxID: "s1"}, service.CodeValidation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.args.validate()
			if tc.code == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate accepted %+v", tc.args)
			}
			if got := service.AsError(err).Code; got != tc.code {
				t.Fatalf("code %q, want %q (%v)", got, tc.code, err)
			}
		})
	}
}

// TestToolErrorsAreToolResults calls tools over an in-memory session: bad arguments (by the schema or by validate)
// and a call without a verified key come back as tool results with isError and our code, never as protocol errors.
func TestToolErrorsAreToolResults(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	s.SetOps(service.New(service.Config{}), nil)
	ct, st := mcp.NewInMemoryTransports()
	if _, err := s.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		if tl.Description == "" || !strings.Contains(string(b), `"type":"object"`) {
			t.Errorf("tool %s: description %q, schema %s", tl.Name, tl.Description, b)
		}
	}

	tests := []struct {
		tool string
		args map[string]any
		want string // a substring of the error text
	}{
		{"run_code", map[string]any{"sandbox_id": "s1", "code": "1", "language": "cobol"}, "validation_error: language"},
		{"run_code", map[string]any{"sandbox_id": "s1"}, "code"},                        // required by the schema
		{"run_command", map[string]any{"sandbox_id": 7, "command": "ls"}, "sandbox_id"}, // wrong type
		{"read_file", map[string]any{"sandbox_id": "s/1", "path": "a"}, "validation_error"},
		{"list_sandboxes", map[string]any{}, "unauthorized"}, // in-memory: no bearer key was verified
	}
	for _, tc := range tests {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s %v: a protocol error: %v", tc.tool, tc.args, err)
		}
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("%s %v: isError %v, %q; want an error with %q", tc.tool, tc.args, res.IsError, text, tc.want)
		}
	}
}

func TestCaptureKeepsHeadAndTail(t *testing.T) {
	var c capture
	c.write([]byte(strings.Repeat("h", longOutputHead)))
	c.write([]byte(strings.Repeat("m", 100_000)))
	c.write([]byte("the end\n"))
	s := c.String()
	if !strings.HasPrefix(s, "hhhh") || !strings.HasSuffix(s, "the end\n") || !strings.Contains(s, "bytes cut") {
		t.Fatalf("capture lost its head or tail: %d bytes, %q...%q", len(s), s[:10], s[len(s)-20:])
	}
	if len(s) > longOutputHead+longOutputTail+100 {
		t.Fatalf("capture kept %d bytes", len(s))
	}
}
