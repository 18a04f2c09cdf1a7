package mcpapi

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Lifecycle tools: profiles, create, list, stop, delete, and the browser links of open_in_browser.

type profileInfo struct {
	ID           string   `json:"id"`
	Description  string   `json:"description,omitempty"`
	Capabilities []string `json:"capabilities"`
	CPUs         float64  `json:"cpus,omitempty"`
	Memory       string   `json:"memory,omitempty"`
}

func (s *Server) addSandboxTools() {
	tool(s, &mcp.Tool{Name: "list_profiles", Description: "List the sandbox profiles you can create sandboxes from, with " +
		"their capabilities (python, node, shell, filesystem, browser, vnc). Pick one whose capabilities fit the task."},
		func(_ context.Context, c caller, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, error) {
			out := []profileInfo{}
			for _, p := range c.ops.Profiles() {
				caps := p.Capabilities
				if caps == nil {
					caps = []string{}
				}
				out = append(out, profileInfo{ID: p.ID, Description: p.Description, Capabilities: caps, CPUs: p.Resources.CPUs, Memory: p.Resources.Memory})
			}
			return jsonResult(map[string]any{"profiles": out})
		})

	tool(s, &mcp.Tool{Name: "create_sandbox", Description: "Create a sandbox: an isolated Linux container with a " +
		"persistent workspace. Returns its id (pass it as sandbox_id to the other tools), status and capabilities. " +
		"The first call to another tool waits for it to start."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in createArgs) (*mcp.CallToolResult, error) {
			sb, err := c.ops.CreateSandbox(ctx, c.p, service.CreateParams{
				Profile: in.Profile, TTL: time.Duration(in.TTLSeconds) * time.Second, Dependencies: in.Dependencies,
			})
			if err != nil {
				return nil, err
			}
			return jsonResult(service.Describe(sb, "", false))
		})

	tool(s, &mcp.Tool{Name: "list_sandboxes", Description: "List your sandboxes (id, profile, status, expiry)."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in listArgs) (*mcp.CallToolResult, error) {
			all := []service.SandboxView{}
			opts := sandboxes.ListOptions{Status: sandboxes.Status(in.Status), Limit: 200}
			for {
				items, next, err := c.ops.ListSandboxes(ctx, c.p, opts)
				if err != nil {
					return nil, err
				}
				for _, sb := range items {
					all = append(all, service.Describe(sb, "", false))
				}
				if next == "" || len(all) >= 1000 {
					break
				}
				opts.Cursor = next
			}
			return jsonResult(map[string]any{"sandboxes": all})
		})

	tool(s, &mcp.Tool{Name: "stop_sandbox", Description: "Stop a sandbox's processes to save resources. Its workspace " +
		"files are kept, and the next tool call starts it again (kernel state is lost)."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in sandboxArgs) (*mcp.CallToolResult, error) {
			if err := c.ops.StopSandbox(ctx, c.p, in.SandboxID); err != nil {
				return nil, err
			}
			return jsonResult(map[string]string{"sandbox_id": in.SandboxID, "status": "stopped"})
		})

	tool(s, &mcp.Tool{Name: "delete_sandbox", Description: "Delete a sandbox and its workspace for good. Deleting a " +
		"sandbox that is already gone succeeds."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in sandboxArgs) (*mcp.CallToolResult, error) {
			if err := c.ops.DeleteSandbox(ctx, c.p, in.SandboxID); err != nil {
				return nil, err
			}
			return jsonResult(map[string]string{"sandbox_id": in.SandboxID, "status": "deleted"})
		})

	tool(s, &mcp.Tool{Name: "open_in_browser", Description: "Get a link a person can click to see the sandbox: its " +
		"terminal, its desktop (browser profiles) or its web app. The link works once and expires; give it to the user, " +
		"do not open it yourself."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in openArgs) (*mcp.CallToolResult, error) {
			ttl := time.Duration(in.TTLSeconds) * time.Second
			if ttl == 0 {
				ttl = 5 * time.Minute
			}
			tk, err := c.ops.IssueTicket(ctx, c.p, in.SandboxID, views[in.View], !in.ReadOnly, ttl)
			if err != nil {
				return nil, err
			}
			link := tk.URL
			if link == "" && c.baseURL != "" {
				link = strings.TrimRight(c.baseURL, "/") + "/sandboxes/" + url.PathEscape(in.SandboxID) + "/" + views[in.View] + "/?ticket=" + url.QueryEscape(tk.Ticket)
			}
			return jsonResult(map[string]any{"url": link, "view": in.View, "expires_at": tk.ExpiresAt.UTC().Format(time.RFC3339)})
		})
}
