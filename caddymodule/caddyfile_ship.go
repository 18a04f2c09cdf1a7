package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sandgate/sandgate/sandboxes"
)

// parseProfileShip reads a profile's Ship options (sandboxes/profile_ship.go) and reports whether the option was
// one of them:
//
//	user shipyard 1000            the sandbox user's name and uid (its group: the same)
//	home /workspace               HOME
//	env_file /workspace/.bay_env.sh  the file the agent writes the profile's env to
//	host_aliases ship [more...]   names that resolve to the sandbox itself
func parseProfileShip(d *caddyfile.Dispenser, p *sandboxes.Profile) (bool, error) {
	switch d.Val() {
	case "user":
		var name, uid string
		if !d.Args(&name, &uid) || d.NextArg() {
			return true, d.ArgErr()
		}
		n, err := strconv.Atoi(uid)
		if err != nil {
			return true, d.Errf("user %s: uid %q is not a number", name, uid)
		}
		p.User = &sandboxes.SandboxUser{Name: name, UID: n}
		return true, nil
	case "home":
		return true, oneString(d, &p.Home)
	case "env_file":
		return true, oneString(d, &p.EnvFile)
	case "host_aliases":
		more := d.RemainingArgs()
		if len(more) == 0 {
			return true, d.ArgErr()
		}
		p.HostAliases = append(p.HostAliases, more...)
		return true, nil
	}
	return false, nil
}
