package bayapi

import (
	"testing"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestKeySettingsValidate and the path beside the API: a key without an owner, a key named twice (or equal to
// the primary) and a path the REST API owns are refused.
func TestKeySettingsValidate(t *testing.T) {
	k := func(key, owner string) service.KeyConfig { return service.KeyConfig{Key: key, Owner: owner} }
	if err := (KeySettings{APIKey: "p", Keys: []service.KeyConfig{k("a", "x"), k("b", "y")}}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []KeySettings{
		{Keys: []service.KeyConfig{k("a", "")}},
		{Keys: []service.KeyConfig{k("a", "x"), k("a", "y")}},
		{APIKey: "a", Keys: []service.KeyConfig{k("a", "x")}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v passed", bad)
		}
	}
	for path, ok := range map[string]bool{"/mcp": true, "/v1mcp": true, "mcp": false, "/": false, "/v1": false, "/v1/mcp": false, "/health": false} {
		if err := CheckBesideAPI("mcp", path); (err == nil) != ok {
			t.Errorf("%q: %v", path, err)
		}
	}
}
