package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/sandboxes"
)

// profileCustomise are the customisation options of a profile block (sandboxes/profile_customise.go), beside
// parseProfile's.
func profileCustomise(p *sandboxes.Profile) opt.Block {
	egress := func(dst func(e *sandboxes.Egress) *[]string) opt.Option {
		return func(d *caddyfile.Dispenser) error {
			if p.Egress == nil {
				p.Egress = &sandboxes.Egress{}
			}
			if dst == nil {
				return opt.String(&p.Egress.Proxy)(d)
			}
			return opt.List(dst(p.Egress))(d)
		}
	}
	return opt.Block{
		"init":           opt.Arg(func(v string) error { p.Init = append(p.Init, v); return nil }), // repeatable, run in order before the sandbox is ready
		"service":        serviceOption(p),
		"dependency":     dependencyOption(p),
		"npm_registry":   opt.String(&p.NPMRegistry),
		"pypi_index_url": opt.String(&p.PyPIIndexURL),
		"apt_mirror":     opt.String(&p.AptMirror),
		"cran_mirror":    opt.String(&p.CRANMirror),                                         // where dependency r packages install from
		"egress_proxy":   egress(nil),                                                       // HTTP(S)_PROXY in the sandbox
		"no_proxy":       egress(func(e *sandboxes.Egress) *[]string { return &e.NoProxy }), // <host>...
		"egress_allow":   egress(func(e *sandboxes.Egress) *[]string { return &e.Allow }),   // <host|*.domain|address|cidr>...
	}
}

// serviceOption reads `service <name> { command <command>; port <port>; restart always|on-failure|never; env <name> <value> }`.
func serviceOption(p *sandboxes.Profile) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		svc := sandboxes.Service{}
		if !d.Args(&svc.Name) || d.NextArg() {
			return d.ArgErr()
		}
		env := func(d *caddyfile.Dispenser) error {
			if d.CountRemainingArgs() != 2 {
				return d.ArgErr()
			}
			return envOption(&svc.Env)(d)
		}
		err := opt.Block{"command": opt.String(&svc.Command), "port": opt.Int(&svc.Port), "restart": opt.String(&svc.Restart), "env": env}.
			Parse(d, "unknown service option %q")
		p.Services = append(p.Services, svc)
		return err
	}
}

// dependencyOption reads `dependency python|node|r <package> [<version>]` and `dependency apt <package>` (apt only
// through a derived image: make profile-images).
func dependencyOption(p *sandboxes.Profile) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		args := d.RemainingArgs()
		if p.Dependencies == nil {
			p.Dependencies = &sandboxes.Dependencies{}
		}
		deps := p.Dependencies
		managers := map[string]*map[string]string{"python": &deps.Python, "node": &deps.Node, "r": &deps.R}
		switch m := managers[args0(args)]; {
		case m != nil && len(args) >= 2 && len(args) <= 3:
			if *m == nil {
				*m = map[string]string{}
			}
			(*m)[args[1]] = append(args[2:], "")[0]
		case len(args) == 2 && args[0] == "apt":
			deps.Apt = append(deps.Apt, args[1])
		default:
			return d.Errf("dependency: want python|node|r <package> [<version>] or apt <package>")
		}
		return nil
	}
}

func args0(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
