// Package extraplugin is a stand-in third-party Caddy plugin (think: a DNS provider) that the xcaddy.sh test builds
// in with --with, proving extra plugins work on the fallback build path.
package extraplugin

import "github.com/caddyserver/caddy/v2"

func init() { caddy.RegisterModule(Extra{}) }

// Extra does nothing; it only has to be listed by `caddy list-modules`.
type Extra struct{}

// CaddyModule returns the Caddy module information.
func (Extra) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "sandgate_test.extra", New: func() caddy.Module { return new(Extra) }}
}
