package sandboxes

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// CodeStorageFull: the filesystem of the gateway's own store (its data dir) is full. Writes are refused with it
// (HTTP 507) while reads keep working; the next write after space returns works, with no restart.
const CodeStorageFull = "storage_full"

// StoreReserve is the free space below which the store refuses new sandboxes before bbolt would meet ENOSPC
// mid-commit: the headroom for the writes already under way (their records, deaths, deletes) to land.
const StoreReserve = 1 << 20

// isNoSpace reports a write that failed for want of space: ENOSPC or a disk quota. bbolt wraps some file errors
// with %s, losing the errno, hence the text match too.
func isNoSpace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "no space left on device") || strings.Contains(msg, "disk quota exceeded")
}

// storageFull is the typed error of a store write refused for want of space in dir.
func storageFull(dir string, err error) *Error {
	return &Error{Code: CodeStorageFull, Message: fmt.Sprintf("the gateway's data disk (%s) is full", dir),
		Hint: "retry later; reads keep working, and writes resume without a restart once the operator frees space there",
		Err:  err}
}

// storeWriteErr types a failed write of a file in dir: out of space becomes CodeStorageFull, anything else is kept.
func storeWriteErr(dir string, err error) error {
	if !isNoSpace(err) {
		return err
	}
	return storageFull(dir, err)
}

// update and batch are bbolt's Update and Batch for the store's writes: a failed commit (bbolt rolls it back and
// the file stays as it was) for want of space comes back as CodeStorageFull, and marks the store full, so that
// creates are refused until a write works again (Writable).
func (s *BoltStore) update(db *bolt.DB, fn func(*bolt.Tx) error) error {
	return s.noteWrite(db.Update(fn))
}

func (s *BoltStore) batch(db *bolt.DB, fn func(*bolt.Tx) error) error {
	return s.noteWrite(db.Batch(fn))
}

func (s *BoltStore) noteWrite(err error) error {
	if isNoSpace(err) {
		s.full.Store(true)
		return storageFull(filepath.Dir(s.path), err)
	}
	if err == nil {
		s.full.Store(false)
	}
	return err
}

// Writable is nil when the store can take a write, else a CodeStorageFull error: its filesystem has less than
// StoreReserve free, or its last write failed for want of space and a small probe write still does. Manager.Create
// asks it first, so a create on a full disk is refused before it makes anything, instead of making a sandbox whose
// record cannot be written.
func (s *BoltStore) Writable() error {
	dir := filepath.Dir(s.path)
	if free, _, err := DiskSpace(dir); err == nil && free < StoreReserve {
		return storageFull(dir, fmt.Errorf("%d bytes free, the reserve is %d", free, StoreReserve))
	}
	if !s.full.Load() {
		return nil
	}
	db, err := s.open()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("write_probe"), []byte("ok")) })
}

// StoreWritable is a Store that can say whether it takes writes (BoltStore does).
type StoreWritable interface {
	Writable() error
}
