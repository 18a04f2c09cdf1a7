package sandboxes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// StoreCorruptError is a store file the gateway refuses to open: empty, truncated or inconsistent. The gateway does
// not start on it, and never re-initialises it (bbolt would turn an empty file into an empty store, and every
// sandbox it recorded would be forgotten). Error says what is wrong and which backup to restore.
type StoreCorruptError struct {
	Path   string
	Reason string
	// Backup is the newest backup beside the store (store_backup.go); "" when there is none.
	Backup string
	Err    error
}

func (e *StoreCorruptError) Error() string {
	msg := fmt.Sprintf("sandbox store %s is damaged (%s), so the gateway will not start on it", e.Path, e.Reason)
	if e.Backup != "" {
		return msg + fmt.Sprintf("; to recover, stop the gateway, move %s aside, copy the newest backup %s to %s and start again "+
			"(changes made after that backup are lost)", e.Path, e.Backup, e.Path)
	}
	return msg + fmt.Sprintf("; there is no backup beside it: move %s aside to start with an empty store (the sandboxes it "+
		"recorded are then unknown to the gateway)", e.Path)
}

func (e *StoreCorruptError) Unwrap() error { return e.Err }

// storePanic is a panic of bbolt reading a damaged file, turned into an error.
type storePanic struct{ v any }

func (p storePanic) Error() string { return fmt.Sprintf("reading the file panicked: %v", p.v) }

// guarded runs f and turns a panic, or a memory fault reading the mapped file, into an error.
func guarded(f func() error) (err error) {
	// A page past the end of a truncated file faults when read through the map; this makes that a panic here.
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = storePanic{r}
		}
	}()
	return f()
}

// createStoreFile makes a new, initialised store at path without ever leaving an empty file there: bbolt writes
// its first pages into a temporary file, which is then linked into place. A zero-length file at path is therefore
// always damage, never a store being born.
func createStoreFile(path string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".init-*")
	if err != nil {
		return fmt.Errorf("creating sandbox store %s: %w", path, err)
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	if err := os.Remove(name); err != nil { // bbolt initialises only a missing or empty file; it must make it
		return fmt.Errorf("creating sandbox store %s: %w", path, err)
	}
	db, err := bolt.Open(name, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("creating sandbox store %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("creating sandbox store %s: %w", path, err)
	}
	// Link, not rename: a store another gateway made meanwhile is kept, not replaced.
	if err := os.Link(name, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating sandbox store %s: %w", path, storeWriteErr(dir, err))
	}
	return syncDir(dir)
}

// checkStoreFile opens the store read-only and checks it before the gateway opens it for writing: a file that is
// empty, shorter than its own header says, unreadable to bbolt or inconsistent (tx.Check) is a *StoreCorruptError.
// Nothing is written. The size check comes before any page is read, because bbolt reads pages through a memory
// map and a page past the end of the file would fault in bbolt's own check goroutine, where it cannot be caught.
func checkStoreFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("checking sandbox store: %w", err)
	}
	corrupt := func(reason string, err error) error {
		backup, _ := NewestStoreBackup(path)
		return &StoreCorruptError{Path: path, Reason: reason, Backup: backup, Err: err}
	}
	if info.Size() == 0 {
		return corrupt("the file is empty (0 bytes)", nil)
	}
	var file *os.File
	var db *bolt.DB
	err = guarded(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				f, err := os.OpenFile(name, flag, perm)
				file = f
				return f, err
			}})
		return err
	})
	var pe *fs.PathError
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return fmt.Errorf("opening sandbox store %s: another process (a second gateway?) holds it: %w", path, err)
	case errors.As(err, &pe):
		return fmt.Errorf("opening sandbox store: %w", err)
	case err != nil:
		if db == nil && file != nil {
			file.Close() // a panic inside Open left bbolt's file, and its lock, open
		}
		return corrupt("bbolt cannot read it: "+err.Error(), err)
	}
	defer db.Close()
	var problems []error
	err = guarded(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if want := tx.Size(); want > info.Size() {
				problems = append(problems, fmt.Errorf("the file is truncated: %d bytes, its header says %d", info.Size(), want))
				return nil
			}
			for err := range tx.Check() {
				if len(problems) < 3 {
					problems = append(problems, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		reasons := make([]string, len(problems))
		for i, p := range problems {
			reasons[i] = p.Error()
		}
		return corrupt(strings.Join(reasons, "; "), errors.Join(problems...))
	}
	return nil
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
