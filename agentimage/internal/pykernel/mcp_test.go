package pykernel

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestPythonMCPTool(t *testing.T) {
	k := newTestKernel(t)
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	k.AddMCPTools(server)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tests := []struct {
		name, code string
		isError    bool
		want       []string
	}{
		{"value and output", "print('hello')\nn = 6\nn * 7", false, []string{"hello\n", "Out[1]: 42"}},
		{"state kept", "n", false, []string{"Out[2]: 6"}},
		{"traceback", "1/0", true, []string{"ZeroDivisionError"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "python_exec", Arguments: map[string]any{"code": tc.code}})
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if res.IsError != tc.isError {
				t.Fatalf("isError %v: %s", res.IsError, text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Fatalf("%q not in %q", w, text)
				}
			}
		})
	}
}
