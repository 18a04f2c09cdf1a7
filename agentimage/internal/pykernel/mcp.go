package pykernel

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PythonInput is the python_exec tool's input.
type PythonInput struct {
	Code      string `json:"code" jsonschema:"Python source to run in the sandbox's persistent kernel; the value of a trailing expression is returned"`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"interrupt the cell after this many milliseconds (default 60000); the kernel keeps its variables"`
}

// AddMCPTools registers python_exec on an MCP server.
func (k *Kernel) AddMCPTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name: "python_exec",
		Description: "Run Python code in a persistent kernel (variables, imports and functions persist between calls; " +
			"cells run one at a time). Returns stdout, stderr, the repr of a trailing expression, the traceback if the " +
			"cell raised, and open matplotlib figures as PNG images. A timeout interrupts the cell with " +
			"KeyboardInterrupt and keeps the kernel's state.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in PythonInput) (*mcp.CallToolResult, any, error) {
		if in.TimeoutMS < 0 {
			return nil, nil, fmt.Errorf("timeout_ms must not be negative")
		}
		res, err := k.Exec(ctx, in.Code, time.Duration(in.TimeoutMS)*time.Millisecond)
		if err != nil {
			return nil, nil, err
		}
		var text strings.Builder
		if res.KernelRestarted {
			text.WriteString("[the previous kernel had died: this cell ran on a fresh kernel, earlier variables are gone]\n")
		}
		if res.Stdout != "" {
			text.WriteString(res.Stdout)
			if !strings.HasSuffix(res.Stdout, "\n") {
				text.WriteString("\n")
			}
		}
		if res.Stderr != "" {
			fmt.Fprintf(&text, "[stderr]\n%s", res.Stderr)
			if !strings.HasSuffix(res.Stderr, "\n") {
				text.WriteString("\n")
			}
		}
		if res.Result != nil {
			fmt.Fprintf(&text, "Out[%d]: %s\n", res.ExecutionCount, *res.Result)
		}
		if res.Error != nil {
			if res.TimedOut {
				text.WriteString("[interrupted: the cell ran past its timeout; the kernel kept its state]\n")
			}
			text.WriteString(strings.Join(res.Error.Traceback, ""))
		}
		if res.OutputTruncated {
			text.WriteString("[output truncated]\n")
		}
		if text.Len() == 0 {
			text.WriteString("(no output)")
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, IsError: !res.Success}
		for _, img := range res.Images {
			png, err := base64.StdEncoding.DecodeString(img)
			if err != nil {
				continue
			}
			out.Content = append(out.Content, &mcp.ImageContent{Data: png, MIMEType: "image/png"})
		}
		return out, nil, nil
	})
}
