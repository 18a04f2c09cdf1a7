package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sandgate/sandgate/sandboxes"
)

// SnapshotOptions bounds stored workspace snapshots; unset values take sandboxes.SnapshotLimits' defaults.
type SnapshotOptions struct {
	// MaxSize caps one snapshot ("10g").
	MaxSize string `json:"max_size,omitempty"`
	// Quota caps the bytes of all snapshots of one owner ("20g").
	Quota string `json:"quota,omitempty"`
	// MaxPerOwner caps how many snapshots one owner keeps.
	MaxPerOwner int `json:"max_per_owner,omitempty"`
}

// validate checks the sizes and counts (a JSON config may hold anything).
func (o *SnapshotOptions) validate() error {
	if o == nil {
		return nil
	}
	for name, s := range map[string]string{"max_size": o.MaxSize, "quota": o.Quota} {
		if s == "" {
			continue
		}
		if _, err := sandboxes.ParseBytes(s); err != nil {
			return fmt.Errorf("sandboxes: snapshots %s: %w", name, err)
		}
	}
	if o.MaxPerOwner < 0 {
		return fmt.Errorf("sandboxes: snapshots max_per_owner must not be negative")
	}
	return nil
}

// limits converts the options; sizes were checked by validate (a bad one here counts as unset).
func (o *SnapshotOptions) limits() sandboxes.SnapshotLimits {
	if o == nil {
		return sandboxes.SnapshotLimits{}
	}
	l := sandboxes.SnapshotLimits{MaxPerOwner: o.MaxPerOwner}
	if o.MaxSize != "" {
		l.MaxBytes, _ = sandboxes.ParseBytes(o.MaxSize)
	}
	if o.Quota != "" {
		l.QuotaBytes, _ = sandboxes.ParseBytes(o.Quota)
	}
	return l
}

// parseSnapshotsOption reads
//
//	snapshots {
//	    max_size      10g
//	    quota         20g
//	    max_per_owner 50
//	}
func parseSnapshotsOption(d *caddyfile.Dispenser, app *App) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	o := &SnapshotOptions{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "max_size":
			err = oneString(d, &o.MaxSize)
		case "quota":
			err = oneString(d, &o.Quota)
		case "max_per_owner":
			err = oneInt(d, &o.MaxPerOwner)
		default:
			return d.Errf("unknown snapshots option %q", d.Val())
		}
		if err != nil {
			return err
		}
		for _, s := range []string{o.MaxSize, o.Quota} {
			if s == "" {
				continue
			}
			if _, err := sandboxes.ParseBytes(s); err != nil {
				return d.WrapErr(err)
			}
		}
	}
	if o.MaxPerOwner < 0 {
		return d.Err("snapshots: max_per_owner must not be negative")
	}
	app.Snapshots = o
	return nil
}
