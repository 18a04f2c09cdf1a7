package mcpapi

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Browser tools drive the Chromium of a sandbox whose profile has the browser capability.

func (s *Server) addBrowserTools() {
	tool(s, &mcp.Tool{Name: "browser_navigate", Description: "Load a URL in the sandbox's browser (browser profiles " +
		"only) and wait for the page. Returns the final URL."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in navigateArgs) (*mcp.CallToolResult, error) {
			d, _ := timeout(in.TimeoutSeconds, defaultTimeoutSec, maxTimeoutSec)
			res, err := c.ops.Browse(ctx, c.p, in.SandboxID, service.BrowserRequest{Action: "navigate", URL: in.URL, Timeout: d})
			if err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{"url": res.Value})
		})

	tool(s, &mcp.Tool{Name: "browser_screenshot", Description: "Take a screenshot of the page open in the sandbox's " +
		"browser. Returns a PNG image."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in sandboxArgs) (*mcp.CallToolResult, error) {
			res, err := c.ops.Browse(ctx, c.p, in.SandboxID, service.BrowserRequest{Action: "screenshot", Timeout: defaultTimeoutSec * time.Second})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: res.PNG, MIMEType: "image/png"}}}, nil
		})

	tool(s, &mcp.Tool{Name: "browser_evaluate", Description: "Evaluate a JavaScript expression in the page open in " +
		"the sandbox's browser. Returns its value as JSON."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in evaluateArgs) (*mcp.CallToolResult, error) {
			d, _ := timeout(in.TimeoutSeconds, defaultTimeoutSec, maxTimeoutSec)
			res, err := c.ops.Browse(ctx, c.p, in.SandboxID, service.BrowserRequest{Action: "evaluate", Script: in.Expression, Timeout: d})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Value}}}, nil
		})

	tool(s, &mcp.Tool{Name: "browser_text", Description: "Get the visible text of the page open in the sandbox's " +
		"browser (what a person would read), without markup."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in sandboxArgs) (*mcp.CallToolResult, error) {
			res, err := c.ops.Browse(ctx, c.p, in.SandboxID, service.BrowserRequest{Action: "text", Timeout: defaultTimeoutSec * time.Second})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Value}}}, nil
		})
}
