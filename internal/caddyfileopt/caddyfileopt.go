// Package caddyfileopt reads the blocks of our Caddyfile directives from a table: each option of a block is one
// row, the option's name and the reader of its arguments into a field. caddymodule's parsers are these tables;
// the readers here say once how a string, a number, a duration, a flag or a list is read and refused.
package caddyfileopt

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Option reads one option of a block: the dispenser is at the option's name, and the option reads its own
// arguments (and nested block, if it has one).
type Option func(d *caddyfile.Dispenser) error

// Block is a block's options by name.
type Block map[string]Option

// Parse reads the block that follows the current line, option by option. An option not in the table is refused
// with unknown, a format with one %q verb for the option's name.
func (b Block) Parse(d *caddyfile.Dispenser, unknown string) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt, ok := b[d.Val()]
		if !ok {
			return d.Errf(unknown, d.Val())
		}
		if err := opt(d); err != nil {
			return err
		}
	}
	return nil
}

// NoArgs refuses arguments on the current line (a directive or option that only opens a block).
func NoArgs(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Arg reads the option's one argument and hands it to set; an error of set is refused at the argument.
func Arg(set func(v string) error) Option {
	return func(d *caddyfile.Dispenser) error {
		if !d.NextArg() {
			return d.ArgErr()
		}
		if err := set(d.Val()); err != nil {
			return d.WrapErr(err)
		}
		return NoArgs(d)
	}
}

// String reads the option's one argument.
func String(dst *string) Option {
	return Arg(func(v string) error { *dst = v; return nil })
}

// OptString reads an option with one optional argument; without it dst is def.
func OptString(dst *string, def string) Option {
	return func(d *caddyfile.Dispenser) error {
		*dst = def
		if d.NextArg() {
			*dst = d.Val()
		}
		return NoArgs(d)
	}
}

// Flag reads an option that takes no argument.
func Flag(dst *bool) Option {
	return func(d *caddyfile.Dispenser) error {
		*dst = true
		return NoArgs(d)
	}
}

// FlagArg reads an option with one optional argument, which sets flag; the argument goes to dst.
func FlagArg(flag *bool, dst *string) Option {
	return func(d *caddyfile.Dispenser) error {
		*flag = true
		return OptString(dst, *dst)(d)
	}
}

// List appends the option's arguments, at least one, to dst; the option may be repeated.
func List(dst *[]string) Option {
	return func(d *caddyfile.Dispenser) error {
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		*dst = append(*dst, args...)
		return nil
	}
}

// Int reads a whole number.
func Int(dst *int) Option {
	return Arg(func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		*dst = n
		return nil
	})
}

// PositiveInt reads a whole number of at least 1, named name in its error.
func PositiveInt(name string, dst *int) Option {
	return Arg(func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%s: want a positive number, got %q", name, v)
		}
		*dst = n
		return nil
	})
}

// Float reads a number, named name in its error.
func Float(name string, dst *float64) Option {
	return Arg(func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s %q is not a number", name, v)
		}
		*dst = f
		return nil
	})
}

// Duration reads a Caddy duration ("90s", "1d"), which may be zero or negative.
func Duration(dst *caddy.Duration) Option {
	return Arg(func(v string) error {
		dur, err := caddy.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration: %v", v, err)
		}
		*dst = caddy.Duration(dur)
		return nil
	})
}

// PositiveDuration reads a positive Caddy duration, named name in its error.
func PositiveDuration(name string, dst *caddy.Duration) Option {
	return Arg(func(v string) error {
		dur, err := caddy.ParseDuration(v)
		if err != nil || dur <= 0 {
			return fmt.Errorf("%s must be a positive duration, not %q", name, v)
		}
		*dst = caddy.Duration(dur)
		return nil
	})
}

// NonNegativeDuration reads a Caddy duration that may be zero, named name in its error.
func NonNegativeDuration(name string, dst *caddy.Duration) Option {
	return Arg(func(v string) error {
		dur, err := caddy.ParseDuration(v)
		if err != nil || dur < 0 {
			return fmt.Errorf("%s must be a duration, not %q", name, v)
		}
		*dst = caddy.Duration(dur)
		return nil
	})
}

// DurationOrOff reads a positive Caddy duration, or off, which is -1 (the JSON's "none").
func DurationOrOff(name string, dst *caddy.Duration) Option {
	return Arg(func(v string) error {
		if v == "off" {
			*dst = -1
			return nil
		}
		dur, err := caddy.ParseDuration(v)
		if err != nil || dur <= 0 {
			return fmt.Errorf("%s %q: a positive duration or off", name, v)
		}
		*dst = caddy.Duration(dur)
		return nil
	})
}

// Module reads an option that names a Caddy module of namespace with its block ("driver docker { ... }") and
// hands the module's name and its JSON to set; check may refuse the name first (nil: any).
func Module(namespace string, check func(d *caddyfile.Dispenser, name string) error, set func(name string, unm caddyfile.Unmarshaler)) Option {
	return func(d *caddyfile.Dispenser) error {
		if !d.NextArg() {
			return d.ArgErr()
		}
		name := d.Val()
		if check != nil {
			if err := check(d, name); err != nil {
				return err
			}
		}
		unm, err := caddyfile.UnmarshalModule(d, namespace+"."+name)
		if err != nil {
			return err
		}
		set(name, unm)
		return nil
	}
}
