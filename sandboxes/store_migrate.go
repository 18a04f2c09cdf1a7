package sandboxes

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// LegacyAPIStoreFile is the file in which the REST API kept its own state before it moved into the one store:
// <data dir>/bayapi.db. ImportAPIStore takes it over once and renames it to LegacyAPIStoreFile + ".migrated".
const LegacyAPIStoreFile = "bayapi.db"

// legacyAPIBuckets are the buckets the API's store had: stored keys, execution history (nested per sandbox),
// cargos (workspaces) and exports. Their names and values are this store's too, so they are copied as they are.
var legacyAPIBuckets = [][]byte{bucketKeys, bucketHistory, bucketCargos, bucketExports}

// ImportLegacyAPIStore imports <dataDir>/bayapi.db (LegacyAPIStoreFile) with ImportAPIStore, once, and logs it
// when it did.
func (s *BoltStore) ImportLegacyAPIStore(dataDir string, log *slog.Logger) error {
	legacy := filepath.Join(dataDir, LegacyAPIStoreFile)
	imported, err := s.ImportAPIStore(legacy)
	if err != nil {
		return err
	}
	if imported {
		log.Info("imported the API's old store into the sandbox store", "from", legacy, "into", s.Path(),
			"set_aside_as", legacy+".migrated")
	}
	return nil
}

// ImportAPIStore takes over an API store an earlier version wrote at path: its buckets are copied into this store
// in one transaction, then the file is renamed to path + ".migrated" so it is never read again. It reports whether
// there was a file to import; a missing file is not an error.
//
// It is idempotent: a value already in this store is kept (so a rerun after a crash between the commit and the
// rename changes nothing), and a history bucket's sequence becomes the larger of the two, so entries recorded later
// still sort after the imported ones.
func (s *BoltStore) ImportAPIStore(path string) (bool, error) {
	if filepath.Clean(path) == filepath.Clean(s.path) {
		return false, nil // namespace "bayapi" in the default data dir: that file is this store
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("looking for the old API store: %w", err)
	}
	db, err := s.open()
	if err != nil {
		return false, err
	}
	// The history writer may have entries in flight; they go to buckets the copy may fill too.
	if err := s.hist.flush(); err != nil {
		return false, err
	}
	old, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return false, fmt.Errorf("opening the old API store %s: %w", path, err)
	}
	err = old.View(func(src *bolt.Tx) error {
		return s.update(db, func(dst *bolt.Tx) error { // a full disk: storage_full, and the store marked full
			for _, name := range legacyAPIBuckets {
				from := src.Bucket(name)
				if from == nil {
					continue
				}
				to, err := dst.CreateBucketIfNotExists(name)
				if err != nil {
					return err
				}
				if err := copyBucket(to, from); err != nil {
					return fmt.Errorf("bucket %s: %w", name, err)
				}
			}
			return buildLearnQueue(dst) // the imported history's runs waiting to be learned (store_learn.go)
		})
	})
	if cerr := old.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("importing the old API store %s: %w", path, err)
	}
	if err := os.Rename(path, path+".migrated"); err != nil {
		return true, fmt.Errorf("setting the imported API store aside: %w", err)
	}
	return true, nil
}

// copyBucket copies from's keys (nested buckets included) into to, keeping the values to already has.
func copyBucket(to, from *bolt.Bucket) error {
	if seq := from.Sequence(); seq > to.Sequence() {
		if err := to.SetSequence(seq); err != nil {
			return err
		}
	}
	return from.ForEach(func(k, v []byte) error {
		if v == nil {
			child, err := to.CreateBucketIfNotExists(k)
			if err != nil {
				return err
			}
			return copyBucket(child, from.Bucket(k))
		}
		if to.Get(k) != nil {
			return nil
		}
		// The source's bytes live only as long as its transaction: the destination keeps copies.
		return to.Put(append([]byte(nil), k...), append([]byte(nil), v...))
	})
}
