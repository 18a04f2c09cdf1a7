package sandboxes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Phase is the Manager's own view of a sandbox's compute; Status is derived from it (and from expiry) on read.
type Phase string

const (
	PhaseCreating Phase = "creating" // recorded before any engine call, so a failed create can always be cleaned up
	PhaseStarting Phase = "starting" // container started, agent not ready yet
	PhaseRunning  Phase = "running"  // agent answered /health
	PhaseStopped  Phase = "stopped"  // stopped by us (idle or asked); container and workspace kept
	PhaseFailed   Phase = "failed"   // could not start, or died past its profile's crash limit (Died says why)
	// PhaseDied: its container died (Died says why); the next use rebuilds it on the same workspace (recovery.go).
	PhaseDied Phase = "died"
)

// Record is the persistent state of one sandbox. Immutable identity is also on the container's labels.
type Record struct {
	ID               string            `json:"id"`
	Profile          string            `json:"profile"`
	ProfileHash      string            `json:"profile_hash"`
	Owner            string            `json:"owner"`
	ContainerID      string            `json:"container_id,omitempty"`
	WorkspaceID      string            `json:"workspace_id"`
	ManagedWorkspace bool              `json:"managed_workspace"`
	Token            string            `json:"token"`
	Env              map[string]string `json:"env,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Egress           *SandboxEgress    `json:"egress,omitempty"`
	CreatedAt        time.Time         `json:"created_at"`
	ExpiresAt        *time.Time        `json:"expires_at,omitempty"`
	IdleExpiresAt    *time.Time        `json:"idle_expires_at,omitempty"`
	Phase            Phase             `json:"phase"`
	Generation       int               `json:"generation"`
	Warm             bool              `json:"warm,omitempty"`
	LaunchType       string            `json:"launch_type,omitempty"`
	Died             *Death            `json:"died,omitempty"`
	LastError        string            `json:"last_error,omitempty"`
	// Crashes are the deaths inside the profile's crash window, oldest first: past its crash limit the sandbox
	// stays failed.
	Crashes []Death `json:"crashes,omitempty"`
	Addr    string  `json:"addr,omitempty"`
	// Spec is the profile as it was when the sandbox was made: restarts keep that shape across reloads.
	Spec *Profile `json:"spec,omitempty"`
	// Gateway is the fleet gateway that made a warm member (SharedStore.Identity); only it claims the member.
	Gateway string `json:"gateway,omitempty"`
	// OnExpire is what the TTL does (expiry.go): "" deletes the sandbox, ExpirePause freezes it, ExpireStop stops it.
	OnExpire string `json:"on_expire,omitempty"`
	// ExpiredAt is set while a sandbox is kept past its TTL by OnExpire: when that happened. ExpiresAt is then
	// the end of its retention.
	ExpiredAt *time.Time `json:"expired_at,omitempty"`
	// ResumeTTL is the lifetime a sandbox kept past its TTL gets again when it resumes (its last TTL).
	ResumeTTL time.Duration `json:"resume_ttl,omitempty"`
	// ImageWarm marks a sandbox made for a warm pool by image (warm_image.go); AwaitsClaim one whose container's
	// agent waits for its create's environment at every start (agentapi.EnvAwaitClaim).
	ImageWarm   bool `json:"image_warm,omitempty"`
	AwaitsClaim bool `json:"awaits_claim,omitempty"`
}

// Store keeps Records across restarts. Every method is safe for concurrent use.
type Store interface {
	Load() ([]Record, error)
	Put(r Record) error
	Delete(id string) error
	// Meta reads a small named value ("" if absent); SetMeta writes one.
	Meta(key string) (string, error)
	SetMeta(key, value string) error
	Close() error
}

var (
	bucketSandboxes = []byte("sandboxes")
	bucketMeta      = []byte("meta")
)

// BoltStore is a Store in one bbolt file: the one embedded store of everything the gateway persists. Beside the
// sandboxes, meta and snapshots it holds what the APIs keep (store_keys.go, store_history.go, store_workspaces.go,
// store_exports.go). It opens the file on first use, so constructing one does no I/O.
type BoltStore struct {
	path   string
	mu     sync.Mutex
	db     *bolt.DB
	closed bool
	// hist feeds the history writer, which runs while the file is open (store_history.go).
	hist history
	// full is set by a write that failed for want of space, cleared by one that worked (store_full.go).
	full atomic.Bool
}

// NewBoltStore returns a store at path; the file and its directory are created on first use.
func NewBoltStore(path string) *BoltStore {
	s := &BoltStore{path: path}
	s.hist.init()
	return s
}

// Path is the store's file.
func (s *BoltStore) Path() string { return s.path }

func (s *BoltStore) open() (*bolt.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil {
		return s.db, nil
	}
	if s.closed {
		// A late write after Close must not reopen (and hold the lock on) a file the next Manager will open.
		return nil, errors.New("sandbox store is closed")
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, fmt.Errorf("creating store directory: %w", err)
	}
	if _, err := os.Stat(s.path); errors.Is(err, fs.ErrNotExist) {
		if err := createStoreFile(s.path); err != nil { // store_check.go
			return nil, err
		}
	}
	// A damaged file stops the gateway with a *StoreCorruptError naming the backup to restore (store_check.go).
	if err := checkStoreFile(s.path); err != nil {
		return nil, err
	}
	var db *bolt.DB
	err := guarded(func() error {
		var err error
		// The timeout turns "another gateway holds this store" into an error instead of a hang.
		db, err = bolt.Open(s.path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening sandbox store %s: %w", s.path, err)
	}
	// A lone write waits at most this long for others to join its commit.
	db.MaxBatchDelay = time.Millisecond
	err = s.update(db, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketSandboxes, bucketMeta, bucketKeys, bucketHistory, bucketCargos} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketLearnQueue) == nil {
			return buildLearnQueue(tx) // a file from before the learn queue (store_learn.go): built once
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialising sandbox store: %w", err)
	}
	s.db = db
	s.hist.start(db, s.noteWrite)
	return db, nil
}

// Load returns every record.
func (s *BoltStore) Load() ([]Record, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	var out []Record
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).ForEach(func(k, v []byte) error {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// Put writes a record.
func (s *BoltStore) Put(r Record) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// Batch commits concurrent writes together: a burst of 20 creates pays one fsync, not 20 in a row (each
	// create persists its record before it answers). A Put is idempotent, as Batch's retries require.
	return s.batch(db, func(tx *bolt.Tx) error { return tx.Bucket(bucketSandboxes).Put([]byte(r.ID), b) })
}

// PutMany writes records in one transaction: one fsync for the lot.
func (s *BoltStore) PutMany(recs []Record) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	blobs := make([][]byte, len(recs))
	for i, r := range recs {
		if blobs[i], err = json.Marshal(r); err != nil {
			return fmt.Errorf("encoding sandbox %s: %w", r.ID, err)
		}
	}
	return s.update(db, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes)
		for i, r := range recs {
			if err := b.Put([]byte(r.ID), blobs[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// RecordBatchWriter is a Store that writes many records at once (BoltStore does); putRecords falls back to one
// Put per record for a Store that is not one.
type RecordBatchWriter interface {
	PutMany(recs []Record) error
}

func putRecords(st Store, recs []Record) error {
	if bw, ok := st.(RecordBatchWriter); ok {
		return bw.PutMany(recs)
	}
	var errs []error
	for _, r := range recs {
		if err := st.Put(r); err != nil {
			errs = append(errs, fmt.Errorf("writing sandbox %s: %w", r.ID, err))
		}
	}
	return errors.Join(errs...)
}

// Delete removes a record; a missing one is not an error.
func (s *BoltStore) Delete(id string) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	// The sandbox's exports go with its record, in the same transaction: no deletion path can leave them behind.
	return s.batch(db, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketSandboxes).Delete([]byte(id)); err != nil {
			return err
		}
		return dropExportsTx(tx, id)
	})
}

// Meta reads a named value.
func (s *BoltStore) Meta(key string) (string, error) {
	db, err := s.open()
	if err != nil {
		return "", err
	}
	var v string
	err = db.View(func(tx *bolt.Tx) error {
		v = string(tx.Bucket(bucketMeta).Get([]byte(key)))
		return nil
	})
	return v, err
}

// SetMeta writes a named value.
func (s *BoltStore) SetMeta(key, value string) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte(key), []byte(value)) })
}

// Close stores the queued history and closes the file if it was opened.
func (s *BoltStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.hist.stop()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return nil
	}
	return err
}
