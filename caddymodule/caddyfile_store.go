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

func (o *StoreOptions) validate() error {
	if o == nil {
		return nil
	}
	if o.BackupKeep < 0 {
		return fmt.Errorf("sandboxes: store backup_keep must not be negative")
	}
	if o.DiskWarnPercent < 0 || o.DiskWarnPercent > 100 {
		return fmt.Errorf("sandboxes: store disk_warn %d%%: a percentage from 1 to 100", o.DiskWarnPercent)
	}
	return nil
}

// settings are the options with their defaults filled in.
func (o *StoreOptions) settings() (interval time.Duration, keep int, warn float64) {
	interval, keep, warn = sandboxes.DefaultStoreBackupInterval, sandboxes.DefaultStoreBackupKeep, sandboxes.DefaultDiskWarnRatio
	if o == nil {
		return
	}
	if o.BackupInterval != 0 {
		interval = time.Duration(o.BackupInterval)
	}
	if o.BackupKeep > 0 {
		keep = o.BackupKeep
	}
	if o.DiskWarnPercent > 0 {
		warn = float64(o.DiskWarnPercent) / 100
	}
	return
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
