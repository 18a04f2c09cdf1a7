package mcpapi

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// What `caddy sandgate-mcp` (caddymodule/cmd_mcp.go) reads from its flags before it runs Bridge.

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
