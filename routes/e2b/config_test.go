package e2b

import (
	"strings"
	"testing"
)

// TestConfigValidate: E2B's own domains (any case, any port), a prefix that is not a path, a negative cap and a
// half-named template are refused; a plain configuration passes.
func TestConfigValidate(t *testing.T) {
	if err := (Config{Prefix: "/e2b", Domain: "sandbox.localhost:8443", Templates: map[string]string{"base": "default"}}).Validate(); err != nil {
		t.Fatal(err)
	}
	for want, c := range map[string]Config{
		"E2B's own":            {Domain: "E2B.app:443"},
		"must be a path":       {Prefix: "e2b"},
		"starting with /":      {Prefix: "/e2b/{x}"},
		"must not be negative": {MaxTimeout: -1},
		"a template needs":     {Templates: map[string]string{"base": ""}},
	} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", c, err, want)
		}
	}
}
