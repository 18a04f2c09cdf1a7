package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestStoreOptionParsing: good values land in StoreOptions, bad ones are Caddyfile errors, and unset ones take
// the defaults.
func TestStoreOptionParsing(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    StoreOptions
	}{
		{in: "store {\nbackup_interval 10m\nbackup_keep 7\ndisk_warn 80%\n}", want: StoreOptions{BackupInterval: 600e9, BackupKeep: 7, DiskWarnPercent: 80}},
		{in: "store {\nbackup_interval off\n}", want: StoreOptions{BackupInterval: -1}},
		{in: "store {\nbackup_interval 0s\n}", err: "positive duration"},
		{in: "store {\nbackup_keep 0\n}", err: "at least 1"},
		{in: "store {\ndisk_warn 120%\n}", err: "percentage"},
		{in: "store {\ndisk_warn lots\n}", err: "percentage"},
		{in: "store {\nbackups 3\n}", err: "unknown store option"},
	} {
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		app := new(App)
		err := parseStoreOption(app)(d)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || *app.StoreConfig != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, app.StoreConfig, err, tc.want)
		}
	}
	var none *StoreOptions
	st, err := none.settings()
	if err != nil || st.BackupInterval != time.Hour || st.BackupKeep != sandboxes.DefaultStoreBackupKeep || st.DiskWarnRatio != sandboxes.DefaultDiskWarnRatio {
		t.Errorf("defaults: %+v, %v", st, err)
	}
	if _, err := (&StoreOptions{DiskWarnPercent: 101}).settings(); err == nil {
		t.Error("disk_warn_percent 101 passed validation")
	}
}
