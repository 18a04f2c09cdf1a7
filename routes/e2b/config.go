package e2b

import (
	"errors"
	"fmt"
	"strings"
)

// reservedDomains are E2B's own sandbox domains: the SDKs send envd traffic for them to https://sandbox.<domain>
// instead of {port}-{id}.<domain>, so a gateway cannot serve them.
var reservedDomains = []string{"e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev"}

// Validate checks what the gateway's configuration names: the timeout cap, the prefix (a path), the domain (not
// one of E2B's own) and the templates.
func (c Config) Validate() error {
	if c.MaxTimeout < 0 {
		return errors.New("max_timeout must not be negative")
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, "*?{} ")) {
		return fmt.Errorf("prefix %q must be a path starting with /", c.Prefix)
	}
	host := strings.ToLower(c.Domain)
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	for _, reserved := range reservedDomains {
		if host == reserved {
			return fmt.Errorf("domain %q is one of E2B's own, which the SDKs route differently", c.Domain)
		}
	}
	for name, profile := range c.Templates {
		if name == "" || profile == "" {
			return errors.New("a template needs a name and a profile")
		}
	}
	return nil
}
