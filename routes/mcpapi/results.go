package mcpapi

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// toolError is a failed call as the model sees it: isError, a one-line "code: message" and the REST API's error
// envelope as structured content, so a client can branch on the code.
func toolError(err error) *mcp.CallToolResult {
	e := service.AsError(err)
	code := wireCode(e.Code)
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: code + ": " + e.Message}},
		StructuredContent: map[string]any{"error": map[string]any{"code": code, "message": e.Message, "details": details}},
	}
}

// codeWire is this dialect's one error table: the REST API's codes, so a client branches on the same names; a
// service code missing here is sent as it is.
var codeWire = map[string]string{
	// A full disk in the sandbox is the runtime failing, as the REST API reports it.
	service.CodeNoSpace: service.CodeShipError,
}

func wireCode(code string) string {
	if c, ok := codeWire[code]; ok {
		return c
	}
	return code
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
