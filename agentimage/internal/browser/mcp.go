package browser

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// NavigateInput is the browser_navigate tool's input.
type NavigateInput struct {
	URL       string `json:"url" jsonschema:"absolute URL to load; services inside the sandbox are at http://127.0.0.1:<port>/"`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"how long to wait for the load event (default 30000)"`
}

// ScreenshotInput is the browser_screenshot tool's input.
type ScreenshotInput struct {
	FullPage bool `json:"full_page,omitempty" jsonschema:"capture the whole scrollable page, not only the viewport"`
}

// EvaluateInput is the browser_evaluate tool's input.
type EvaluateInput struct {
	Expression string `json:"expression" jsonschema:"JavaScript expression evaluated in the page; a promise is awaited; the value is returned as JSON"`
}

// EvaluateOutput is the browser_evaluate tool's structured output.
type EvaluateOutput struct {
	Value any `json:"value"`
}

// AddMCPTools registers the browser tools on an MCP server when the sandbox has a browser. They drive the same
// persistent page as the REST helpers.
func (b *Browser) AddMCPTools(s *mcp.Server) {
	if !b.Enabled() {
		return
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "browser_navigate",
		Description: "Load a URL in the sandbox's browser page and wait for it to load; returns the final URL and the page title.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in NavigateInput) (*mcp.CallToolResult, agentapi.BrowserNavigateResult, error) {
		out, err := b.Navigate(ctx, agentapi.BrowserNavigateRequest(in))
		return nil, out, err
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "browser_screenshot",
		Description: "Take a PNG screenshot of the sandbox's browser page.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in ScreenshotInput) (*mcp.CallToolResult, any, error) {
		png, err := b.Screenshot(ctx, in.FullPage)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: png, MIMEType: "image/png"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "browser_text",
		Description: "Read the visible text (innerText), URL and title of the sandbox's browser page.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, agentapi.BrowserTextResult, error) {
		out, err := b.Text(ctx)
		return nil, out, err
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "browser_evaluate",
		Description: "Evaluate a JavaScript expression in the sandbox's browser page and return its JSON value.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in EvaluateInput) (*mcp.CallToolResult, EvaluateOutput, error) {
		raw, err := b.Evaluate(ctx, in.Expression)
		if err != nil {
			return nil, EvaluateOutput{}, err
		}
		return nil, EvaluateOutput{Value: raw}, nil
	})
}
