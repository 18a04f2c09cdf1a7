// Command caddy is the fleet binary: Caddy with the sandgate modules and the Kubernetes driver built in, the build
// used when xcaddy is not installed. Keep its imports equal to what
// `xcaddy build --with github.com/sandgate/sandgate --with github.com/sandgate/sandgate/kubernetes` would produce.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// Caddy's standard modules, as in the stock binary.
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// The sandgate modules, and the Kubernetes driver.
	_ "github.com/sandgate/sandgate"
	_ "github.com/sandgate/sandgate/kubernetes"
)

func main() {
	caddycmd.Main()
}
