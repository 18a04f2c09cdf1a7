package caddymodule

import (
	"log/slog"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/routes/mcpapi"
)

// mcpServers keeps one MCP server per API data dir across reloads: its sessions live in the server, so a client's
// session id keeps working after `caddy reload`; the new config only points the tools at its own handler (SetOps).
var mcpServers = caddy.NewUsagePool()

type mcpHolder struct{ s *mcpapi.Server }

// Destruct has nothing to release: sessions end with their idle timeout or the process.
func (mcpHolder) Destruct() error { return nil }

// loadMCPServer takes a reference to the MCP server of the API data dir key; release it with mcpServers.Delete(key).
func loadMCPServer(key string, logger *slog.Logger) (*mcpapi.Server, error) {
	val, _, err := mcpServers.LoadOrNew(key, func() (caddy.Destructor, error) {
		return mcpHolder{s: mcpapi.New(mcpapi.Options{Version: sandgateVersion(), Logger: logger})}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(mcpHolder).s, nil
}
