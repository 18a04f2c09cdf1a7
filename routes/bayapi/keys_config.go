package bayapi

import (
	"errors"
	"fmt"
	"strings"
)

// Validate checks the configured keys: each has a secret and an owner, and none is named twice (the primary
// included).
func (s KeySettings) Validate() error {
	seen := map[string]bool{}
	for _, k := range s.Keys {
		if k.Key == "" || k.Owner == "" {
			return errors.New("a key needs a secret and an owner")
		}
		if seen[k.Key] || k.Key == s.APIKey {
			return errors.New("a key is configured twice")
		}
		seen[k.Key] = true
	}
	return nil
}

// CheckBesideAPI checks a path served beside the REST API on its site (the MCP server's): a path of its own that
// the API does not own (Handler.Owns).
func CheckBesideAPI(name, path string) error {
	if !strings.HasPrefix(path, "/") || path == "/" || path == "/v1" || strings.HasPrefix(path, "/v1/") || path == "/health" {
		return fmt.Errorf("%s path %q must start with / and not overlap the REST API", name, path)
	}
	return nil
}
