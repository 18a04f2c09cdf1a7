package mcpapi

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// FuzzToolArguments sends arbitrary JSON objects as the arguments of every tool: whatever a tenant's model sends,
// the answer is a tool result (an error one here, as no key was verified), never a protocol error or a panic.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"sandbox_id":"s1","code":"1"}`, `{"sandbox_id":"../../x","path":"/etc/passwd"}`,
		`{"sandbox_id":"s1","language":"r","code":"x","timeout_seconds":-1}`, `{"view":"cdp","sandbox_id":"s"}`,
		`{"sandbox_id":"s1","url":"file:///etc/passwd"}`, `{"paths":[],"sandbox_id":"s"}`, `{"sandbox_id":7}`,
	} {
		f.Add(uint8(0), seed)
		f.Add(uint8(7), seed)
	}
	ctx := context.Background()
	s := New(Options{})
	s.SetOps(service.New(service.Config{}), nil)
	ct, st := mcp.NewInMemoryTransports()
	if _, err := s.MCP().Connect(ctx, st, nil); err != nil {
		f.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, raw string) {
		var args map[string]any
		if json.Unmarshal([]byte(raw), &args) != nil {
			return
		}
		name := tools.Tools[int(which)%len(tools.Tools)].Name
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s %s: protocol error %v", name, raw, err)
		}
		if !res.IsError {
			t.Fatalf("%s %s: succeeded without a verified key", name, raw)
		}
	})
}
