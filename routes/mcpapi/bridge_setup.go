package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// What `caddy sandgate-mcp` (caddymodule/sandbox_api.go) reads from its flags; RunBridge runs it.

// BridgeURL is the MCP endpoint of a gateway's base URL: /mcp appended unless the URL already ends in it.
func BridgeURL(base string) (string, error) {
	url := strings.TrimRight(base, "/")
	if url == "" {
		return "", errors.New("--url is required")
	}
	if !strings.HasSuffix(url, "/mcp") {
		url += "/mcp"
	}
	return url, nil
}

// BridgeKey reads the API key from file (a trailing newline ignored) or, without a file, from the environment
// variable envName; an empty key is an error.
func BridgeKey(file, envName string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the API key: %w", err)
		}
		if k := strings.TrimSpace(string(b)); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("the key file %s is empty", file)
	}
	if k := strings.TrimSpace(os.Getenv(envName)); k != "" {
		return k, nil
	}
	return "", fmt.Errorf("no API key: give --key-file or set %s", envName)
}

// BridgeHelp is the long help of `caddy sandgate-mcp`.
const BridgeHelp = `Relays MCP (newline-delimited JSON-RPC on stdin and stdout) to the gateway's Streamable HTTP endpoint,
authenticated with an API key. MCP clients that launch servers as commands (Claude Desktop, Cursor, Claude Code)
use it as the command of a server entry. --url is the gateway's base URL (its /mcp is appended unless the URL
already ends in /mcp). The key is read from --key-file (trailing newline ignored) or the environment variable
named by --key-env (default SANDGATE_API_KEY). Nothing but MCP messages is written to stdout.`

// RunBridge is `caddy sandgate-mcp`: it reads the flags' URL and key (BridgeURL, BridgeKey) and bridges stdin and
// stdout to the gateway until ctx ends or either side closes.
func RunBridge(ctx context.Context, base, keyFile, keyEnv string) error {
	url, err := BridgeURL(base)
	if err != nil {
		return err
	}
	key, err := BridgeKey(keyFile, keyEnv)
	if err != nil {
		return err
	}
	return Bridge(ctx, BridgeConfig{URL: url, Key: key, In: os.Stdin, Out: os.Stdout})
}
