package sandboxes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The gateway's configuration names the bounds of snapshots and exports and the store's settings as an operator
// writes them (sizes such as "10g", a percentage); these read and check them. A zero or empty value takes the
// default.

// ParseSnapshotLimits reads the bounds of stored snapshots: the size of one, the quota of one owner's, how many.
func ParseSnapshotLimits(maxSize, quota string, maxPerOwner int) (SnapshotLimits, error) {
	l := SnapshotLimits{MaxPerOwner: maxPerOwner}
	for _, s := range []struct {
		name, v string
		dst     *int64
	}{{"max_size", maxSize, &l.MaxBytes}, {"quota", quota, &l.QuotaBytes}} {
		if s.v == "" {
			continue
		}
		n, err := ParseBytes(s.v)
		if err != nil {
			return SnapshotLimits{}, fmt.Errorf("sandboxes: snapshots %s: %w", s.name, err)
		}
		*s.dst = n
	}
	if maxPerOwner < 0 {
		return SnapshotLimits{}, errors.New("sandboxes: snapshots max_per_owner must not be negative")
	}
	return l, nil
}

// ParseExportLimits reads the bounds of the files one owner's sandboxes register for import: how many, the
// bytes they take in the store, how long one lives.
func ParseExportLimits(maxPerOwner int, quota string, ttl time.Duration) (ExportLimits, error) {
	l := ExportLimits{MaxPerOwner: maxPerOwner, TTL: ttl}
	if maxPerOwner < 0 {
		return ExportLimits{}, errors.New("sandboxes: exports max_per_owner must not be negative")
	}
	if quota != "" {
		n, err := ParseBytes(quota)
		if err != nil {
			return ExportLimits{}, fmt.Errorf("sandboxes: exports quota: %w", err)
		}
		l.MaxBytesPerOwner = n
	}
	if ttl < 0 {
		return ExportLimits{}, errors.New("sandboxes: exports ttl must not be negative")
	}
	return l, nil
}

// StoreSettings are the store's backups and disk warnings (StartStoreLoops).
type StoreSettings struct {
	// BackupInterval is how often a backup is written; negative: never.
	BackupInterval time.Duration
	// BackupKeep is how many backups are kept, the newest.
	BackupKeep int
	// DiskWarnRatio is the used fraction of a disk at which the gateway warns.
	DiskWarnRatio float64
}

// NewStoreSettings checks the store's settings and fills in the defaults (an interval of 0, a keep of 0 and a
// percentage of 0 are DefaultStoreBackupInterval, DefaultStoreBackupKeep and DefaultDiskWarnRatio).
func NewStoreSettings(backupInterval time.Duration, backupKeep, diskWarnPercent int) (StoreSettings, error) {
	s := StoreSettings{BackupInterval: DefaultStoreBackupInterval, BackupKeep: DefaultStoreBackupKeep, DiskWarnRatio: DefaultDiskWarnRatio}
	if backupKeep < 0 {
		return s, errors.New("sandboxes: store backup_keep must not be negative")
	}
	if diskWarnPercent < 0 || diskWarnPercent > 100 {
		return s, fmt.Errorf("sandboxes: store disk_warn %d%%: a percentage from 1 to 100", diskWarnPercent)
	}
	if backupInterval != 0 {
		s.BackupInterval = backupInterval
	}
	if backupKeep > 0 {
		s.BackupKeep = backupKeep
	}
	if diskWarnPercent > 0 {
		s.DiskWarnRatio = float64(diskWarnPercent) / 100
	}
	return s, nil
}

// ParseBackupKeep reads the store's `backup_keep <n>`: at least 1.
func ParseBackupKeep(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("backup_keep %q: at least 1", v)
	}
	return n, nil
}

// ParseDiskWarn reads the store's `disk_warn <n>%`: a percentage from 1% to 100% (the sign may be left out).
func ParseDiskWarn(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("disk_warn %q: a percentage from 1%% to 100%%", v)
	}
	return n, nil
}
