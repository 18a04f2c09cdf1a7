package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestCheckOrigins: a site that serves the console and proxies sandbox apps is refused, whatever the nesting,
// unless the app route opted in with shared_origin; the console and apps on different hosts, a site that lists its
// kinds without app, and a console-less site are accepted.
func TestCheckOrigins(t *testing.T) {
	console := &Pages{APIKeys: true}
	keys := &Pages{ConsoleKeys: nil}
	app := &SandboxRoute{Kind: "app"}
	shared := &SandboxRoute{Kind: "app", SharedOrigin: true}
	term := &SandboxRoute{Kind: "terminal"}
	sub := func(hs ...caddyhttp.MiddlewareHandler) *caddyhttp.Subroute {
		var rs caddyhttp.RouteList
		for _, h := range hs {
			rs = append(rs, caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{h}})
		}
		return &caddyhttp.Subroute{Routes: rs}
	}
	site := func(host string, hs ...caddyhttp.MiddlewareHandler) caddyhttp.Route {
		r := caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{sub(hs...)}}
		if host != "" {
			r.MatcherSets = caddyhttp.MatcherSets{{caddyhttp.MatchHost{host}}}
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		routes  caddyhttp.RouteList
		refused bool
	}{
		{"console and apps", caddyhttp.RouteList{site("localhost", console, sub(term, app))}, true},
		{"apps first, nested", caddyhttp.RouteList{site("localhost", sub(sub(app)), console)}, true},
		{"hostless routes are one site", caddyhttp.RouteList{site("", console), site("", app)}, true},
		{"same hosts in two routes", caddyhttp.RouteList{site("gw", console), site("gw", app)}, true},
		{"opt-in", caddyhttp.RouteList{site("localhost", console, shared)}, false},
		{"kinds without app", caddyhttp.RouteList{site("localhost", console, term)}, false},
		{"content site", caddyhttp.RouteList{site("localhost", console, term), site("*.sandbox.localhost", app)}, false},
		{"pages without console", caddyhttp.RouteList{site("localhost", keys, app)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOrigins(&caddyhttp.App{Servers: map[string]*caddyhttp.Server{"srv0": {Routes: tc.routes}}})
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "shared_origin") || !strings.Contains(err.Error(), "console") {
					t.Fatalf("accepted or unclear: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}
