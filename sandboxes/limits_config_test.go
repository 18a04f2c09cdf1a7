package sandboxes

import (
	"strings"
	"testing"
	"time"
)

// TestParseLimits: the operator's bounds become the limits; bad ones are refused naming the option; empty ones
// stay zero (the defaults) or, for the store, take the defaults.
func TestParseLimits(t *testing.T) {
	snap, err := ParseSnapshotLimits("2m", "1g", 5)
	if err != nil || snap != (SnapshotLimits{MaxBytes: 2 << 20, QuotaBytes: 1 << 30, MaxPerOwner: 5}) {
		t.Errorf("snapshots: %+v, %v", snap, err)
	}
	if snap, err := ParseSnapshotLimits("", "", 0); err != nil || snap != (SnapshotLimits{}) {
		t.Errorf("empty snapshots: %+v, %v", snap, err)
	}
	exp, err := ParseExportLimits(500, "2m", 24*time.Hour)
	if err != nil || exp != (ExportLimits{MaxPerOwner: 500, MaxBytesPerOwner: 2 << 20, TTL: 24 * time.Hour}) {
		t.Errorf("exports: %+v, %v", exp, err)
	}
	st, err := NewStoreSettings(0, 0, 0)
	if err != nil || st != (StoreSettings{DefaultStoreBackupInterval, DefaultStoreBackupKeep, DefaultDiskWarnRatio}) {
		t.Errorf("store defaults: %+v, %v", st, err)
	}
	if st, err := NewStoreSettings(-1, 7, 80); err != nil || st != (StoreSettings{-1, 7, 0.8}) {
		t.Errorf("store: %+v, %v", st, err)
	}
	for name, err := range map[string]error{
		"snapshots max_size":                         second(ParseSnapshotLimits("lots", "", 0)),
		"snapshots quota":                            second(ParseSnapshotLimits("", "x", 0)),
		"must not be negative":                       second(ParseSnapshotLimits("", "", -1)),
		"exports max_per_owner must not be negative": second(ParseExportLimits(-1, "", 0)),
		"exports quota":                              second(ParseExportLimits(0, "x", 0)),
		"exports ttl must not be negative":           second(ParseExportLimits(0, "", -1)),
		"backup_keep must not be negative":           second(NewStoreSettings(0, -1, 0)),
		"disk_warn 101%":                             second(NewStoreSettings(0, 0, 101)),
	} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("want an error with %q, got %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestParseStoreOptionValues(t *testing.T) {
	for _, tc := range []struct {
		parse func(string) (int, error)
		in    string
		want  int
		err   string
	}{
		{ParseBackupKeep, "7", 7, ""},
		{ParseBackupKeep, "0", 0, "at least 1"},
		{ParseBackupKeep, "x", 0, "at least 1"},
		{ParseDiskWarn, "80%", 80, ""},
		{ParseDiskWarn, "100", 100, ""},
		{ParseDiskWarn, "0%", 0, "percentage"},
		{ParseDiskWarn, "120%", 0, "percentage"},
		{ParseDiskWarn, "lots", 0, "percentage"},
	} {
		got, err := tc.parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %d %v, want %q", tc.in, got, err, tc.err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("%q: %d %v, want %d", tc.in, got, err, tc.want)
		}
	}
}
