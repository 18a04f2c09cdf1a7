package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// positiveDuration reads the one argument of the current option, a positive duration, into dst (beside oneString,
// oneInt and oneCaddyDuration in caddyfile_sandboxes.go).
func positiveDuration(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	key := d.Val()
	var v string
	if err := oneString(d, &v); err != nil {
		return err
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return d.Errf("%s must be a positive duration, not %q", key, v)
	}
	*dst = caddy.Duration(dur)
	return nil
}
