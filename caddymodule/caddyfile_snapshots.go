package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
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

// parseSnapshotsOption reads `snapshots { max_size 10g; quota 20g; max_per_owner 50 }`.
func parseSnapshotsOption(app *App) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		o := &SnapshotOptions{}
		size := func(dst *string) opt.Option {
			return opt.Arg(func(v string) error { *dst = v; _, err := sandboxes.ParseBytes(v); return err })
		}
		err := opt.NoArgs(d)
		if err == nil {
			err = opt.Block{"max_size": size(&o.MaxSize), "quota": size(&o.Quota), "max_per_owner": opt.Int(&o.MaxPerOwner)}.
				Parse(d, "unknown snapshots option %q")
		}
		if err == nil && o.MaxPerOwner < 0 {
			err = d.Err("snapshots: max_per_owner must not be negative")
		}
		app.Snapshots = o
		return err
	}
}
