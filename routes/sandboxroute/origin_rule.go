package sandboxroute

import "fmt"

// OriginRule is the origin rule (docs/edge.md, "Origins"): the site that serves the console serves only sandgate's
// own code. Bytes from a sandbox run script, so an app served on the console's origin could read the console and
// act with the operator's cookie. The gateway tells the rule what each site of a server serves (a site may be told
// several times, once per route); Err refuses a site that serves both the console and sandbox apps, unless the
// app's route opted in with shared_origin (then it does not count as serving apps here).
type OriginRule struct {
	sites map[string]*originSite
	order []string
}

type originSite struct{ console, apps bool }

// Serves records that site serves the console, sandbox apps (without the opt-in), or both.
func (o *OriginRule) Serves(site string, console, apps bool) {
	if o.sites == nil {
		o.sites = map[string]*originSite{}
	}
	s, ok := o.sites[site]
	if !ok {
		s = &originSite{}
		o.sites[site] = s
		o.order = append(o.order, site)
	}
	s.console = s.console || console
	s.apps = s.apps || apps
}

// Err names the first site, in the order they were told, that serves the console and sandbox apps on one origin.
func (o *OriginRule) Err() error {
	for _, name := range o.order {
		if s := o.sites[name]; s.console && s.apps {
			return fmt.Errorf("%s serves the console and sandbox apps on one origin: script a sandbox serves would "+
				"run with the operator's console session. Serve apps on their own origin (a site such as "+
				"*.sandbox.example.com with `sandbox_ticket app { base_domains sandbox.example.com }` and `sandbox_proxy app`) "+
				"and list this site's kinds without app (`sandbox_proxy /sandboxes/* terminal pty vnc cdp files mcp`), "+
				"or accept the risk with `shared_origin` in this sandbox_proxy (apps then run under "+
				"Content-Security-Policy: sandbox); see docs/edge.md, Origins", name)
		}
	}
	return nil
}
