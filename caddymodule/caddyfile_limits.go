package caddymodule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/sandboxes"
)

// The `sandboxes` app's bounds of snapshots and exports and its store's settings: the config's fields, their
// blocks in the Caddyfile, and their conversion (sandboxes/limits_config.go checks them).

// SnapshotOptions bounds stored workspace snapshots; unset values take sandboxes.SnapshotLimits' defaults.
type SnapshotOptions struct {
	// MaxSize caps one snapshot ("10g").
	MaxSize string `json:"max_size,omitempty"`
	// Quota caps the bytes of all snapshots of one owner ("20g").
	Quota string `json:"quota,omitempty"`
	// MaxPerOwner caps how many snapshots one owner keeps.
	MaxPerOwner int `json:"max_per_owner,omitempty"`
}

func (o *SnapshotOptions) limits() (sandboxes.SnapshotLimits, error) {
	if o == nil {
		return sandboxes.SnapshotLimits{}, nil
	}
	return sandboxes.ParseSnapshotLimits(o.MaxSize, o.Quota, o.MaxPerOwner)
}

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

func (o *ExportOptions) limits() (sandboxes.ExportLimits, error) {
	if o == nil {
		return sandboxes.ExportLimits{}, nil
	}
	return sandboxes.ParseExportLimits(o.MaxPerOwner, o.Quota, time.Duration(o.TTL))
}

// StoreOptions are the gateway's own store's backups and disk warnings (docs/lifecycle.md, "The gateway's store").
type StoreOptions struct {
	// BackupInterval is how often a backup is written beside the store (default 1h; negative: none, the
	// Caddyfile's "off").
	BackupInterval caddy.Duration `json:"backup_interval,omitempty"`
	// BackupKeep is how many backups are kept, the newest (default 3).
	BackupKeep int `json:"backup_keep,omitempty"`
	// DiskWarnPercent is the used percentage of the data dir's or the engine's disk at which the gateway warns
	// (default 90).
	DiskWarnPercent int `json:"disk_warn_percent,omitempty"`
}

// settings are the options with their defaults filled in.
func (o *StoreOptions) settings() (sandboxes.StoreSettings, error) {
	if o == nil {
		o = &StoreOptions{}
	}
	return sandboxes.NewStoreSettings(time.Duration(o.BackupInterval), o.BackupKeep, o.DiskWarnPercent)
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
		if _, lerr := o.limits(); err == nil && lerr != nil {
			err = d.Err(lerr.Error())
		}
		app.Exports = o
		return err
	}
}

// parseStoreOption reads `store { backup_interval 1h|off; backup_keep 3; disk_warn 90% }`.
func parseStoreOption(app *App) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		o := &StoreOptions{}
		keep := opt.Arg(func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("backup_keep %q: at least 1", v)
			}
			o.BackupKeep = n
			return nil
		})
		warn := opt.Arg(func(v string) error {
			n, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
			if err != nil || n < 1 || n > 100 {
				return fmt.Errorf("disk_warn %q: a percentage from 1%% to 100%%", v)
			}
			o.DiskWarnPercent = n
			return nil
		})
		err := opt.NoArgs(d)
		if err == nil {
			err = opt.Block{"backup_interval": opt.DurationOrOff("backup_interval", &o.BackupInterval), "backup_keep": keep, "disk_warn": warn}.
				Parse(d, "unknown store option %q")
		}
		app.StoreConfig = o
		return err
	}
}
