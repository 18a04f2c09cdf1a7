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
		Long:  mcpapi.BridgeHelp,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("url", "", "gateway base URL, e.g. https://gw.example.com")
			cmd.Flags().String("key-file", "", "file holding the API key")
			cmd.Flags().String("key-env", "SANDGATE_API_KEY", "environment variable holding the API key, when no --key-file")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				if err := mcpapi.RunBridge(ctx, fl.String("url"), fl.String("key-file"), fl.String("key-env")); err != nil {
					return 1, fmt.Errorf("sandgate-mcp: %w", err)
				}
				return 0, nil
			})
		},
	})
}
