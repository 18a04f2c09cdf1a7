// Package sandgate is the root of the sandgate Caddy plugins. Importing it registers every sandgate module, so
// `xcaddy build --with github.com/sandgate/sandgate=.` builds the same binary as `go build ./cmd/caddy`.
package sandgate

import (
	// Registers the sandgate Caddy modules and directives.
	_ "github.com/sandgate/sandgate/caddymodule"
)
