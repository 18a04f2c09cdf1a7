// Command caddy is Caddy with the sandgate modules built in: the build used when xcaddy is not installed.
// Keep its imports equal to what `xcaddy build --with github.com/sandgate/sandgate=.` would produce.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// Caddy's standard modules, as in the stock binary.
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// The sandgate modules.
	_ "github.com/sandgate/sandgate"
)

func main() {
	caddycmd.Main()
}
