package caddymodule

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/sandgate/sandgate/routes/mcpapi"
)

// `caddy sandgate-mcp` bridges an MCP client that only launches commands (stdio) to a gateway's /mcp.
func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "sandgate-mcp",
		Usage: "--url <https://gateway> (--key-file <file> | --key-env <VAR>)",
		Short: "Bridges MCP over stdio to a sandgate gateway's /mcp",
		Long: `Relays MCP (newline-delimited JSON-RPC on stdin and stdout) to the gateway's Streamable HTTP endpoint,
authenticated with an API key. MCP clients that launch servers as commands (Claude Desktop, Cursor, Claude Code)
use it as the command of a server entry. --url is the gateway's base URL (its /mcp is appended unless the URL
already ends in /mcp). The key is read from --key-file (trailing newline ignored) or the environment variable
named by --key-env (default SANDGATE_API_KEY). Nothing but MCP messages is written to stdout.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("url", "", "gateway base URL, e.g. https://gw.example.com")
			cmd.Flags().String("key-file", "", "file holding the API key")
			cmd.Flags().String("key-env", "SANDGATE_API_KEY", "environment variable holding the API key, when no --key-file")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(cmdSandgateMCP)
		},
	})
}

func cmdSandgateMCP(fl caddycmd.Flags) (int, error) {
	url, err := mcpapi.BridgeURL(fl.String("url"))
	if err != nil {
		return caddy1(err)
	}
	key, err := mcpapi.BridgeKey(fl.String("key-file"), fl.String("key-env"))
	if err != nil {
		return caddy1(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mcpapi.Bridge(ctx, mcpapi.BridgeConfig{URL: url, Key: key, In: os.Stdin, Out: os.Stdout}); err != nil {
		return caddy1(err)
	}
	return 0, nil
}

func caddy1(err error) (int, error) { return 1, fmt.Errorf("sandgate-mcp: %w", err) }
