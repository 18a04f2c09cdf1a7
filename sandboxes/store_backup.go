package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Backups of the store are whole, consistent copies written beside it: <store>.backup-<UTC time>. Restoring one is
// copying it over the store while the gateway is stopped (docs/lifecycle.md, "The gateway's store").
const (
	backupInfix = ".backup-"
	// backupTimeLayout sorts by name in time order.
	backupTimeLayout = "20060102T150405.000000000Z"
	// DefaultStoreBackupKeep and DefaultStoreBackupInterval are the backups kept and how often one is written
	// when the configuration does not say.
	DefaultStoreBackupKeep     = 3
	DefaultStoreBackupInterval = time.Hour
)

// StoreBackups lists the backups of the store at path, oldest first.
func StoreBackups(path string) ([]string, error) {
	prefix := filepath.Base(path) + backupInfix
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("listing store backups: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(name, prefix) && !strings.HasSuffix(name, ".tmp") {
			if _, err := time.Parse(backupTimeLayout, strings.TrimPrefix(name, prefix)); err == nil {
				out = append(out, filepath.Join(filepath.Dir(path), name))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// NewestStoreBackup is the newest backup of the store at path, "" if there is none.
func NewestStoreBackup(path string) (string, error) {
	all, err := StoreBackups(path)
	if err != nil || len(all) == 0 {
		return "", err
	}
	return all[len(all)-1], nil
}

// Backup writes a consistent copy of the store beside it (bbolt's Tx.WriteTo in a read transaction, so writers
// carry on), atomically: a temporary file, fsynced, renamed into place. It then removes the oldest backups beyond
// keep, and temporary files a crash left. It returns the new backup's path.
func (s *BoltStore) Backup(now time.Time, keep int) (string, error) {
	if keep < 1 {
		return "", fmt.Errorf("store backups: keep %d, want at least 1", keep)
	}
	db, err := s.open()
	if err != nil {
		return "", err
	}
	final := s.path + backupInfix + now.UTC().Format(backupTimeLayout)
	tmp := final + ".tmp"
	if err := writeBackup(db, tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("backing up the sandbox store to %s: %w", final, storeWriteErr(filepath.Dir(final), err))
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("backing up the sandbox store: %w", err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return "", fmt.Errorf("backing up the sandbox store: %w", err)
	}
	return final, s.pruneBackups(keep, tmp)
}

func writeBackup(db *bolt.DB, tmp string) error {
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// pruneBackups keeps the newest keep backups and removes leftover temporary files other than current.
func (s *BoltStore) pruneBackups(keep int, current string) error {
	all, err := StoreBackups(s.path)
	if err != nil {
		return err
	}
	var errs []error
	for len(all) > keep {
		if err := os.Remove(all[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		all = all[1:]
	}
	stale, _ := filepath.Glob(s.path + backupInfix + "*.tmp")
	for _, f := range stale {
		if f != current {
			os.Remove(f)
		}
	}
	return errors.Join(errs...)
}

// RunBackups writes a backup every interval, keeping keep, until ctx ends. The first is written at once unless
// the newest backup is younger than interval, so frequent restarts do not rotate good backups out. A failed backup
// (a full disk) is logged and tried again at the next tick.
func (s *BoltStore) RunBackups(ctx context.Context, interval time.Duration, keep int, log *slog.Logger) {
	if interval <= 0 || keep < 1 {
		return
	}
	wait := time.Duration(0)
	if newest, _ := NewestStoreBackup(s.path); newest != "" {
		stamp := strings.TrimPrefix(filepath.Base(newest), filepath.Base(s.path)+backupInfix)
		if at, err := time.Parse(backupTimeLayout, stamp); err == nil {
			wait = max(0, interval-time.Since(at))
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if path, err := s.Backup(time.Now(), keep); err != nil {
			log.Warn("backing up the sandbox store", "error", err)
		} else {
			log.Debug("backed up the sandbox store", "backup", path)
		}
		t.Reset(interval)
	}
}
