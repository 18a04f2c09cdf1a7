package caddymodule

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/sandboxes"
)

// ExportOptions bound the files each owner's sandboxes register as importable by its other sandboxes (the Bay
// API's export/import); unset values take sandboxes.ExportLimits' defaults (10,000 paths, 8 MiB, 7 days).
type ExportOptions struct {
	// MaxPerOwner caps how many registrations one owner keeps across all of its sandboxes.
	MaxPerOwner int `json:"max_per_owner,omitempty"`
	// Quota caps the bytes those registrations take in the gateway's store ("8m").
	Quota string `json:"quota,omitempty"`
	// TTL is how long a registration lives after its last export call.
	TTL caddy.Duration `json:"ttl,omitempty"`
}

// validate checks the counts, size and TTL (a JSON config may hold anything).
func (o *ExportOptions) validate() error {
	if o == nil {
		return nil
	}
	if o.MaxPerOwner < 0 {
		return fmt.Errorf("sandboxes: exports max_per_owner must not be negative")
	}
	if o.Quota != "" {
		if _, err := sandboxes.ParseBytes(o.Quota); err != nil {
			return fmt.Errorf("sandboxes: exports quota: %w", err)
		}
	}
	if o.TTL < 0 {
		return fmt.Errorf("sandboxes: exports ttl must not be negative")
	}
	return nil
}

// limits converts the options; the size was checked by validate (a bad one here counts as unset).
func (o *ExportOptions) limits() sandboxes.ExportLimits {
	if o == nil {
		return sandboxes.ExportLimits{}
	}
	l := sandboxes.ExportLimits{MaxPerOwner: o.MaxPerOwner, TTL: time.Duration(o.TTL)}
	if o.Quota != "" {
		l.MaxBytesPerOwner, _ = sandboxes.ParseBytes(o.Quota)
	}
	return l
}

// parseExportsOption reads `exports { max_per_owner 10000; quota 8m; ttl 7d }`.
func parseExportsOption(app *App) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		o := &ExportOptions{}
		quota := opt.Arg(func(v string) error { o.Quota = v; _, err := sandboxes.ParseBytes(v); return err })
		err := opt.NoArgs(d)
		if err == nil {
			err = opt.Block{"max_per_owner": opt.Int(&o.MaxPerOwner), "quota": quota, "ttl": opt.Duration(&o.TTL)}.
				Parse(d, "unknown exports option %q")
		}
		if err == nil && o.validate() != nil {
			err = d.Err(o.validate().Error())
		}
		app.Exports = o
		return err
	}
}
