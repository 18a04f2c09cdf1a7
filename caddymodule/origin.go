package caddymodule

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sandgate/sandgate/routes/sandboxroute"
)

// checkOrigins holds the provisioned http app to the origin rule (sandboxroute.OriginRule), so JSON configs are held
// to it too: a site is the set of a server's top-level routes with the same host matchers, which is what a
// Caddyfile site block adapts to.
func checkOrigins(app *caddyhttp.App) error {
	if app == nil {
		return nil
	}
	for _, srvName := range slices.Sorted(maps.Keys(app.Servers)) {
		var rule sandboxroute.OriginRule
		for _, r := range app.Servers[srvName].Routes {
			var console, apps bool
			walkHandlers(r.Handlers, &console, &apps)
			rule.Serves(fmt.Sprintf("server %s, site %s", srvName, hostKey(r.MatcherSets)), console, apps)
		}
		if err := rule.Err(); err != nil {
			return err
		}
	}
	return nil
}

// hostKey names the hosts a top-level route is for; "every host" for a route without a host matcher.
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
	if len(hosts) == 0 {
		return "every host"
	}
	slices.Sort(hosts)
	return strings.Join(hosts, ",")
}

// walkHandlers records whether handlers serve the console or sandbox apps (without shared_origin), through subroutes.
func walkHandlers(hs []caddyhttp.MiddlewareHandler, console, apps *bool) {
	for _, h := range hs {
		switch h := h.(type) {
		case *Pages:
			*console = *console || h.APIKeys || len(h.ConsoleKeys) > 0
		case *SandboxRoute:
			*apps = *apps || h.Kind == "app" && !h.SharedOrigin
		case *caddyhttp.Subroute:
			for _, r := range h.Routes {
				walkHandlers(r.Handlers, console, apps)
			}
		}
	}
}
