package mcpapi

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// File tools: read, write, edit, list, search, and moving files between sandboxes (export and import).

// maxReadBytes is the most read_file returns; bigger files are cut with a note.
const maxReadBytes = 256 << 10

func (s *Server) addFileTools() {
	tool(s, &mcp.Tool{Name: "read_file", Description: "Read a text file of the sandbox's workspace. Files over 256 KiB " +
		"are cut; use run_command (head, tail, sed -n) for parts of big files."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in pathArgs) (*mcp.CallToolResult, error) {
			b, err := c.ops.ReadFile(ctx, c.p, in.SandboxID, in.Path)
			if err != nil {
				return nil, err
			}
			text := string(b)
			cut := len(b) > maxReadBytes
			if cut {
				text = strings.ToValidUTF8(string(b[:maxReadBytes]), "")
			}
			if !utf8.ValidString(text) {
				return nil, &service.Error{Code: service.CodeValidation, Message: in.Path + " is not a text file"}
			}
			res := &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: text}},
				StructuredContent: map[string]any{"path": in.Path, "content": text, "size": len(b), "truncated": cut},
			}
			return res, nil
		})

	tool(s, &mcp.Tool{Name: "write_file", Description: "Create or overwrite a text file in the sandbox's workspace " +
		"with the given content. Parent directories are created."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in writeArgs) (*mcp.CallToolResult, error) {
			if err := c.ops.WriteFile(ctx, c.p, in.SandboxID, in.Path, strings.NewReader(in.Content)); err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{"path": in.Path, "size": len(in.Content)})
		})

	tool(s, &mcp.Tool{Name: "edit_file", Description: "Replace exact text in a file of the sandbox's workspace. " +
		"old_string must occur exactly once (include surrounding lines to make it unique) unless replace_all is set."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in editArgs) (*mcp.CallToolResult, error) {
			res, err := c.ops.EditFile(ctx, c.p, in.SandboxID, agentapi.EditRequest{
				Path: in.Path, Old: in.OldString, New: in.NewString, ReplaceAll: in.ReplaceAll,
			})
			if err != nil {
				return nil, err
			}
			return jsonResult(res)
		})

	tool(s, &mcp.Tool{Name: "list_files", Description: "List a directory of the sandbox's workspace: names, sizes, " +
		"whether each is a file or a directory."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in listFilesArgs) (*mcp.CallToolResult, error) {
			p := in.Path
			if p == "" {
				p = "."
			}
			entries, err := c.ops.ListDir(ctx, c.p, in.SandboxID, p)
			if err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{"path": p, "entries": entries})
		})

	tool(s, &mcp.Tool{Name: "search_files", Description: "Search the contents of the sandbox's files with a regular " +
		"expression (ripgrep). Returns matching lines with their file and line number."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, error) {
			res, err := c.ops.SearchFiles(ctx, c.p, in.SandboxID, agentapi.GrepRequest{
				Pattern: in.Pattern, Path: in.Path, Glob: in.Glob, CaseInsensitive: in.CaseInsensitive, Limit: in.Limit,
			})
			if err != nil {
				return nil, err
			}
			if res.Matches == nil {
				res.Matches = []agentapi.GrepMatch{}
			}
			return jsonResult(res)
		})

	tool(s, &mcp.Tool{Name: "export_files", Description: "Allow your other sandboxes to import these workspace files " +
		"with import_file. Nothing is copied until they do."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in exportArgs) (*mcp.CallToolResult, error) {
			es, err := c.ops.ExportFiles(ctx, c.p, in.SandboxID, in.Paths)
			if err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{"sandbox_id": in.SandboxID, "exports": es})
		})

	tool(s, &mcp.Tool{Name: "import_file", Description: "Copy a file into the sandbox's workspace: either a file " +
		"another of your sandboxes exported (from_sandbox and path), or a public http(s) URL. Private and internal " +
		"addresses are refused."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in importArgs) (*mcp.CallToolResult, error) {
			res, err := c.ops.ImportFile(ctx, c.p, in.SandboxID, service.ImportParams{
				FromSandbox: in.FromSandbox, Path: in.Path, URL: in.URL, Destination: in.Destination,
			})
			if err != nil {
				return nil, err
			}
			return jsonResult(res)
		})
}
