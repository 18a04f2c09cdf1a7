package mcpapi

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/routes/bayapi"
)

// toolError is a failed call as the model sees it: isError, a one-line "code: message" and the REST API's error
// envelope as structured content, so a client can branch on the code.
func toolError(err error) *mcp.CallToolResult {
	e := bayapi.AsError(err)
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: e.Code + ": " + e.Message}},
		StructuredContent: map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message, "details": details}},
	}
}

// jsonResult answers v as structured content and as its JSON text (for clients that read only text), followed by
// any extra content (images).
func jsonResult(v any, extra ...mcp.Content) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		Content:           append([]mcp.Content{&mcp.TextContent{Text: string(b)}}, extra...),
		StructuredContent: json.RawMessage(b),
	}, nil
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
