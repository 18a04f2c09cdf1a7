package caddymodule

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The origin rule (docs/edge.md, "Origins"): the site that serves the console serves only sandgate's own code.
// Bytes from a sandbox run script, so an app served on the console's origin could read the console and act with the
// operator's cookie. A config whose site serves both the console and sandbox apps is refused when it loads, unless
// the app's sandbox_proxy opts in with shared_origin. The check runs on the provisioned http app (so JSON configs
// are held to it too); a site is the set of a server's top-level routes with the same host matchers, which is what
// a Caddyfile site block adapts to.

// siteUse is what one site serves.
type siteUse struct {
	name    string
	console bool
	apps    bool
}

// checkOrigins refuses a site that serves the console and sandbox apps without the shared_origin opt-in.
func checkOrigins(app *caddyhttp.App) error {
	if app == nil {
		return nil
	}
	names := make([]string, 0, len(app.Servers))
	for name := range app.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, srvName := range names {
		srv := app.Servers[srvName]
		sites := map[string]*siteUse{}
		var order []string
		for _, r := range srv.Routes {
			key := hostKey(r.MatcherSets)
			u, ok := sites[key]
			if !ok {
				name := key
				if name == "" {
					name = "every host"
				}
				u = &siteUse{name: fmt.Sprintf("server %s, site %s", srvName, name)}
				sites[key] = u
				order = append(order, key)
			}
			walkHandlers(r.Handlers, u)
		}
		for _, k := range order {
			if u := sites[k]; u.console && u.apps {
				return fmt.Errorf("%s serves the console and sandbox apps on one origin: script a sandbox serves would "+
					"run with the operator's console session. Serve apps on their own origin (a site such as "+
					"*.sandbox.example.com with `sandbox_ticket app { base_domains sandbox.example.com }` and `sandbox_proxy app`) "+
					"and list this site's kinds without app (`sandbox_proxy /sandboxes/* terminal pty vnc cdp files mcp`), "+
					"or accept the risk with `shared_origin` in this sandbox_proxy (apps then run under "+
					"Content-Security-Policy: sandbox); see docs/edge.md, Origins", u.name)
			}
		}
	}
	return nil
}

// hostKey names the hosts a top-level route is for; "" for a route without a host matcher.
func hostKey(sets caddyhttp.MatcherSets) string {
	var hosts []string
	for _, set := range sets {
		for _, m := range set {
			switch h := m.(type) {
			case caddyhttp.MatchHost:
				hosts = append(hosts, h...)
			case *caddyhttp.MatchHost:
				hosts = append(hosts, (*h)...)
			}
		}
	}
	slices.Sort(hosts)
	return strings.Join(hosts, ",")
}

// walkHandlers records what handlers serve, through subroutes.
func walkHandlers(hs []caddyhttp.MiddlewareHandler, u *siteUse) {
	for _, h := range hs {
		switch h := h.(type) {
		case *Pages:
			if h.APIKeys || len(h.ConsoleKeys) > 0 {
				u.console = true
			}
		case *SandboxRoute:
			if h.Kind == "app" && !h.SharedOrigin {
				u.apps = true
			}
		case *caddyhttp.Subroute:
			for _, r := range h.Routes {
				walkHandlers(r.Handlers, u)
			}
		}
	}
}
