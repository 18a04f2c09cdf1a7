package bayapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Store keeps the API's own state in a bbolt file: API key hashes, execution history and cargos. Sandboxes
// themselves live in the Manager's store.
//
// History is written off the request path: every exec records an entry, and a synchronous bbolt commit (an
// fsync) per exec tripled the API's p99 latency. A single writer commits queued entries in one transaction; reads
// of the history first wait for the queue to drain, so a client always reads its own writes.
type Store struct {
	db      *bolt.DB
	log     atomic.Pointer[slog.Logger]
	hist    chan histOp
	stopped chan struct{}
	closeMu sync.Once
}

// histOp is a queued history entry, or (entry nil) a barrier that is released once everything before it is stored.
type histOp struct {
	entry   *HistoryEntry
	flushed chan struct{}
}

// historyQueue bounds entries waiting for the writer; a full queue makes AddHistory wait (back-pressure).
const historyQueue = 1024

var (
	bucketKeys    = []byte("api_keys")
	bucketHistory = []byte("history") // nested: one bucket per sandbox id, keyed by created-at order
	bucketCargos  = []byte("cargos")
)

// OpenStore opens (creating) the store at path. bbolt locks the file: one process, one open Store per file.
func OpenStore(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the API store's directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening the API store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketKeys, bucketHistory, bucketCargos} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialising the API store: %w", err)
	}
	s := &Store{db: db, hist: make(chan histOp, historyQueue), stopped: make(chan struct{})}
	s.log.Store(slog.Default())
	go s.writeHistory()
	return s, nil
}

// SetLogger names where history write failures are reported.
func (s *Store) SetLogger(l *slog.Logger) {
	if l != nil {
		s.log.Store(l)
	}
}

// Close stores the queued history and releases the file.
func (s *Store) Close() error {
	s.closeMu.Do(func() { close(s.hist) })
	<-s.stopped
	return s.db.Close()
}

// writeHistory is the single history writer: it commits whatever is queued in one transaction.
func (s *Store) writeHistory() {
	defer close(s.stopped)
	for op := range s.hist {
		batch := []histOp{op}
	drain:
		for len(batch) < historyQueue {
			select {
			case more, ok := <-s.hist:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		var entries []*HistoryEntry
		for _, b := range batch {
			if b.entry != nil {
				entries = append(entries, b.entry)
			}
		}
		if len(entries) > 0 {
			if err := s.putHistory(entries); err != nil {
				s.log.Load().Warn("recording execution history", "entries", len(entries), "error", err)
			}
		}
		for _, b := range batch {
			if b.flushed != nil {
				close(b.flushed)
			}
		}
	}
}

// flushHistory waits until every entry queued before the call is stored.
func (s *Store) flushHistory() {
	done := make(chan struct{})
	s.hist <- histOp{flushed: done}
	<-done
}

// ActiveKeys returns the stored keys that are active.
func (s *Store) ActiveKeys() ([]StoredKey, error) {
	var out []StoredKey
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKeys).ForEach(func(_, v []byte) error {
			var k StoredKey
			if err := json.Unmarshal(v, &k); err != nil {
				return fmt.Errorf("decoding a stored key: %w", err)
			}
			if k.Active {
				out = append(out, k)
			}
			return nil
		})
	})
	return out, err
}

// PutKey stores a key hash.
func (s *Store) PutKey(k StoredKey) error {
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketKeys).Put([]byte(k.Hash), b) })
}

// History limits: one entry's code, output and error are cut to MaxHistoryField bytes each, and a sandbox keeps its
// newest MaxHistoryEntries entries. A sandbox's history is removed with it (HistoryReaper).
const (
	MaxHistoryField   = 64 << 10
	MaxHistoryEntries = 1000
)

// capField cuts s to MaxHistoryField bytes on a UTF-8 boundary, setting *truncated when it does.
func capField(s string, truncated *bool) string {
	if len(s) <= MaxHistoryField {
		return s
	}
	*truncated = true
	cut := MaxHistoryField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// AddHistory queues an execution record; it is stored in the background (see Store). Code, output and error are
// cut to MaxHistoryField bytes each (Truncated says so).
func (s *Store) AddHistory(e *HistoryEntry) error {
	c := *e
	c.Code = capField(c.Code, &c.Truncated)
	for _, f := range []**string{&c.Output, &c.Error, &c.Description, &c.Tags, &c.Notes} {
		if *f != nil && len(**f) > MaxHistoryField {
			v := capField(**f, &c.Truncated)
			*f = &v
		}
	}
	s.hist <- histOp{entry: &c}
	return nil
}

func (s *Store) putHistory(entries []*HistoryEntry) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, e := range entries {
			b, err := json.Marshal(storedHistory{*e, e.SandboxID})
			if err != nil {
				return err
			}
			sb, err := tx.Bucket(bucketHistory).CreateBucketIfNotExists([]byte(e.SandboxID))
			if err != nil {
				return err
			}
			// A per-sandbox sequence orders entries as they were recorded, even within one clock tick.
			seq, err := sb.NextSequence()
			if err != nil {
				return err
			}
			if err := sb.Put([]byte(fmt.Sprintf("%020d", seq)), b); err != nil {
				return err
			}
			// Keep the newest MaxHistoryEntries: keys are consecutive sequence numbers (only the oldest are ever
			// removed), so the count is seq - first + 1.
			for {
				k, _ := sb.Cursor().First()
				first, err := strconv.ParseUint(string(k), 10, 64)
				if k == nil || err != nil || seq-first+1 <= MaxHistoryEntries {
					break
				}
				if err := sb.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

type storedHistory struct {
	HistoryEntry
	Sandbox string `json:"sandbox_id"`
}

// History returns a sandbox's entries, newest first.
func (s *Store) History(sandboxID string) ([]*HistoryEntry, error) {
	page, _, err := s.HistoryPage(sandboxID, nil, 0, MaxHistoryEntries+1)
	return page, err
}

// HistoryPage returns the entries matching keep (nil: all), newest first, skipping offset and returning at most
// limit, with the number that matched. Entries are decoded one at a time: only the page is held.
func (s *Store) HistoryPage(sandboxID string, keep func(*HistoryEntry) bool, offset, limit int) ([]*HistoryEntry, int, error) {
	s.flushHistory()
	out := []*HistoryEntry{}
	total := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucketHistory).Bucket([]byte(sandboxID))
		if sb == nil {
			return nil
		}
		c := sb.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			var h storedHistory
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("decoding history entry %s: %w", k, err)
			}
			h.HistoryEntry.SandboxID = h.Sandbox
			e := h.HistoryEntry
			if keep != nil && !keep(&e) {
				continue
			}
			if total >= offset && len(out) < limit {
				out = append(out, &e)
			}
			total++
		}
		return nil
	})
	return out, total, err
}

// HistorySandboxes lists the sandbox ids that have stored history.
func (s *Store) HistorySandboxes() ([]string, error) {
	s.flushHistory()
	var ids []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHistory).ForEachBucket(func(k []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}

// UpdateHistory applies fn to one entry and stores it; it reports false when there is no such entry.
func (s *Store) UpdateHistory(sandboxID, id string, fn func(*HistoryEntry)) (*HistoryEntry, bool, error) {
	s.flushHistory()
	var found *HistoryEntry
	err := s.db.Update(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucketHistory).Bucket([]byte(sandboxID))
		if sb == nil {
			return nil
		}
		c := sb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var h storedHistory
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("decoding history entry %s: %w", k, err)
			}
			if h.ID != id {
				continue
			}
			h.HistoryEntry.SandboxID = h.Sandbox
			fn(&h.HistoryEntry)
			b, err := json.Marshal(h)
			if err != nil {
				return err
			}
			e := h.HistoryEntry
			found = &e
			return sb.Put(append([]byte(nil), k...), b)
		}
		return nil
	})
	return found, found != nil, err
}

// DropHistory forgets a deleted sandbox's history.
func (s *Store) DropHistory(sandboxID string) error {
	s.flushHistory()
	return s.db.Update(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketHistory).DeleteBucket([]byte(sandboxID))
		if errors.Is(err, bolterrors.ErrBucketNotFound) {
			return nil
		}
		return err
	})
}

// Cargo is a workspace volume as Bay presents it.
type Cargo struct {
	ID                 string    `json:"id"`
	Owner              string    `json:"owner"`
	Managed            bool      `json:"managed"`
	ManagedBySandboxID *string   `json:"managed_by_sandbox_id"`
	Backend            string    `json:"backend"`
	SizeLimitMB        int       `json:"size_limit_mb"`
	CreatedAt          time.Time `json:"created_at"`
	LastAccessedAt     time.Time `json:"last_accessed_at"`
}

// PutCargo stores a cargo.
func (s *Store) PutCargo(c *Cargo) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketCargos).Put([]byte(c.ID), b) })
}

// Cargo returns one cargo, or nil.
func (s *Store) Cargo(id string) (*Cargo, error) {
	var c *Cargo
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCargos).Get([]byte(id))
		if v == nil {
			return nil
		}
		c = new(Cargo)
		return json.Unmarshal(v, c)
	})
	return c, err
}

// Cargos returns every cargo in id order.
func (s *Store) Cargos() ([]*Cargo, error) {
	var out []*Cargo
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCargos).ForEach(func(_, v []byte) error {
			c := new(Cargo)
			if err := json.Unmarshal(v, c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	return out, err
}

// DeleteCargo forgets a cargo.
func (s *Store) DeleteCargo(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketCargos).Delete([]byte(id)) })
}
