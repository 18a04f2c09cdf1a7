package caddymodule_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

func adaptToJSON(input string) (string, error) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	raw, warnings, err := adapter.Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return "", fmt.Errorf("adapting: %w", err)
	}
	if len(warnings) > 0 {
		return "", fmt.Errorf("adapter warnings: %v", warnings)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "\t"); err != nil {
		return "", err
	}
	return out.String(), nil
}
