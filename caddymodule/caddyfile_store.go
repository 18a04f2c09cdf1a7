package caddymodule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

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

// parseStoreOption reads
//
//	store {
//	    backup_interval 1h    (or off)
//	    backup_keep     3
//	    disk_warn       90%
//	}
func parseStoreOption(d *caddyfile.Dispenser, app *App) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	o := &StoreOptions{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "backup_interval":
			var s string
			if err = oneString(d, &s); err == nil {
				if s == "off" {
					o.BackupInterval = -1
				} else if v, perr := caddy.ParseDuration(s); perr != nil || v <= 0 {
					err = d.Errf("backup_interval %q: a positive duration or off", s)
				} else {
					o.BackupInterval = caddy.Duration(v)
				}
			}
		case "backup_keep":
			if err = oneInt(d, &o.BackupKeep); err == nil && o.BackupKeep < 1 {
				err = d.Errf("backup_keep %d: at least 1", o.BackupKeep)
			}
		case "disk_warn":
			var s string
			if err = oneString(d, &s); err == nil {
				n, perr := strconv.Atoi(strings.TrimSuffix(s, "%"))
				if perr != nil || n < 1 || n > 100 {
					err = d.Errf("disk_warn %q: a percentage from 1%% to 100%%", s)
				}
				o.DiskWarnPercent = n
			}
		default:
			return d.Errf("unknown store option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	app.StoreConfig = o
	return nil
}
