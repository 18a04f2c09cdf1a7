package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sandgate/sandgate/sandboxes"
)

// parseProfileCustomise reads the customisation options of a profile block (sandboxes/profile_customise.go):
//
//	init <command>                              # repeatable, run in order before the sandbox is ready
//	service <name> {
//	    command <command>
//	    port    <port>
//	    restart always|on-failure|never
//	    env     <name> <value>
//	}
//	dependency python|node|r <package> [<version>]
//	dependency apt <package>                    # only through a derived image (make profile-images)
//	npm_registry   <url>
//	pypi_index_url <url>
//	apt_mirror     <url>
//	cran_mirror    <url>                        # where dependency r packages install from
//	egress_proxy   <url>                        # HTTP(S)_PROXY in the sandbox
//	no_proxy       <host>...
//	egress_allow   <host|*.domain|address|cidr>...
//
// It reports whether the option was one of these.
func parseProfileCustomise(d *caddyfile.Dispenser, p *sandboxes.Profile) (bool, error) {
	egress := func() *sandboxes.Egress {
		if p.Egress == nil {
			p.Egress = &sandboxes.Egress{}
		}
		return p.Egress
	}
	switch d.Val() {
	case "init":
		var cmd string
		if err := oneString(d, &cmd); err != nil {
			return true, err
		}
		p.Init = append(p.Init, cmd)
	case "service":
		svc := sandboxes.Service{}
		if !d.Args(&svc.Name) || d.NextArg() {
			return true, d.ArgErr()
		}
		for nesting := d.Nesting(); d.NextBlock(nesting); {
			var err error
			switch d.Val() {
			case "command":
				err = oneString(d, &svc.Command)
			case "port":
				err = oneInt(d, &svc.Port)
			case "restart":
				err = oneString(d, &svc.Restart)
			case "env":
				var k, v string
				if !d.Args(&k, &v) || d.NextArg() {
					return true, d.ArgErr()
				}
				if svc.Env == nil {
					svc.Env = map[string]string{}
				}
				svc.Env[k] = v
			default:
				return true, d.Errf("unknown service option %q", d.Val())
			}
			if err != nil {
				return true, err
			}
		}
		p.Services = append(p.Services, svc)
	case "dependency":
		args := d.RemainingArgs()
		if p.Dependencies == nil {
			p.Dependencies = &sandboxes.Dependencies{}
		}
		deps := p.Dependencies
		switch {
		case len(args) >= 2 && len(args) <= 3 && (args[0] == "python" || args[0] == "node" || args[0] == "r"):
			version := ""
			if len(args) == 3 {
				version = args[2]
			}
			m := &deps.Python
			switch args[0] {
			case "node":
				m = &deps.Node
			case "r":
				m = &deps.R
			}
			if *m == nil {
				*m = map[string]string{}
			}
			(*m)[args[1]] = version
		case len(args) == 2 && args[0] == "apt":
			deps.Apt = append(deps.Apt, args[1])
		default:
			return true, d.Errf("dependency: want python|node|r <package> [<version>] or apt <package>")
		}
	case "npm_registry":
		return true, oneString(d, &p.NPMRegistry)
	case "pypi_index_url":
		return true, oneString(d, &p.PyPIIndexURL)
	case "apt_mirror":
		return true, oneString(d, &p.AptMirror)
	case "cran_mirror":
		return true, oneString(d, &p.CRANMirror)
	case "egress_proxy":
		return true, oneString(d, &egress().Proxy)
	case "no_proxy", "egress_allow":
		option := d.Val()
		args := d.RemainingArgs()
		if len(args) == 0 {
			return true, d.ArgErr()
		}
		if option == "no_proxy" {
			egress().NoProxy = append(egress().NoProxy, args...)
		} else {
			egress().Allow = append(egress().Allow, args...)
		}
	default:
		return false, nil
	}
	return true, nil
}
