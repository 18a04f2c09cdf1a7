package sandboxes

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Execution history (Bay's /history routes) is written off the request path: every exec records an entry, and a
// synchronous bbolt commit (an fsync) per exec tripled the API's p99 latency. A single writer commits queued
// entries in one transaction; reads of the history first wait for the queue to drain, so a client always reads its
// own writes.

// bucketHistory is nested: one bucket per sandbox id, keyed by a per-sandbox sequence.
var bucketHistory = []byte("history")

// historyQueue bounds entries waiting for the writer; a full queue makes AddHistory wait (back-pressure).
const historyQueue = 1024

// History limits: one entry's code, output and error are cut to MaxHistoryField bytes each, and a sandbox keeps its
// newest MaxHistoryEntries entries. A sandbox's history is removed with it (ReapHistory).
const (
	MaxHistoryField   = 64 << 10
	MaxHistoryEntries = 1000
)

// HistoryEntry is one recorded execution, Bay's shape.
type HistoryEntry struct {
	ID              string  `json:"id"`
	SandboxID       string  `json:"-"`
	SessionID       *string `json:"session_id"`
	ExecType        string  `json:"exec_type"`
	Code            string  `json:"code"`
	Success         bool    `json:"success"`
	ExecutionTimeMS int64   `json:"execution_time_ms"`
	Output          *string `json:"output"`
	Error           *string `json:"error"`
	// PayloadRef names a stored payload of the execution (Bay's blob:blob-... of a learning run); null when none.
	PayloadRef  *string `json:"payload_ref"`
	Description *string `json:"description"`
	Tags        *string `json:"tags"`
	Notes       *string `json:"notes"`
	// LearnEnabled and LearnStatus are Bay's learning marks: a browser run asked to be learnt from is "pending"
	// (its trace is kept under PayloadRef), one that was not is "skipped"; other executions have none (null).
	LearnEnabled     bool       `json:"learn_enabled"`
	LearnStatus      *string    `json:"learn_status"`
	LearnError       *string    `json:"learn_error"`
	LearnProcessedAt *time.Time `json:"learn_processed_at"`
	CreatedAt        time.Time  `json:"created_at"`
	// Trace is a browser run's trace (JSON, at most MaxTraceBytes), stored with the entry under PayloadRef
	// (store_traces.go) and never part of the entry's own JSON.
	Trace []byte `json:"-"`
	// Truncated is our addition: code, output or error was longer than MaxHistoryField and only its start is kept.
	Truncated bool `json:"truncated,omitempty"`
}

// storedHistory is an entry at rest: the sandbox id, which the wire shape leaves out, is kept too.
type storedHistory struct {
	HistoryEntry
	Sandbox string `json:"sandbox_id"`
}

// histOp is a queued history entry, or (entry nil) a barrier that is released once everything before it is stored.
type histOp struct {
	entry   *HistoryEntry
	flushed chan struct{}
}

// history is the store's queue and single writer.
type history struct {
	log atomic.Pointer[slog.Logger]
	// mu is held shared while queueing and exclusively to close the queue, so nothing is sent on a closed channel
	// (a request of a config being unloaded may still record an execution).
	mu      sync.RWMutex
	ch      chan histOp
	stopped chan struct{}
	running bool
	closed  bool
	// decoded counts the stored entries reads have decoded (BoltStore.HistoryEntriesRead).
	decoded atomic.Uint64
}

var errHistoryClosed = errors.New("the store is closed: execution history is not recorded")

func (h *history) init() {
	h.ch = make(chan histOp, historyQueue)
	h.stopped = make(chan struct{})
	h.log.Store(slog.Default())
}

// start runs the writer on db once; the store calls it when it opens its file. note sees every commit's result
// (BoltStore.noteWrite), so a history write that meets a full disk marks the store full as any other write does.
func (h *history) start(db *bolt.DB, note func(error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running || h.closed {
		return
	}
	h.running = true
	go h.write(db, note)
}

// stop closes the queue and waits until the writer has stored everything queued.
func (h *history) stop() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	running := h.running
	close(h.ch)
	h.mu.Unlock()
	if running {
		<-h.stopped
	}
}

func (h *history) enqueue(op histOp) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return errHistoryClosed
	}
	h.ch <- op
	return nil
}

// flush waits until every entry queued before the call is stored.
func (h *history) flush() error {
	done := make(chan struct{})
	if err := h.enqueue(histOp{flushed: done}); err != nil {
		return err
	}
	<-done
	return nil
}

// write commits whatever is queued in one transaction, until the queue is closed.
func (h *history) write(db *bolt.DB, note func(error) error) {
	defer close(h.stopped)
	for op := range h.ch {
		batch := []histOp{op}
	drain:
		for len(batch) < historyQueue {
			select {
			case more, ok := <-h.ch:
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
			if err := note(putHistory(db, entries)); err != nil {
				h.log.Load().Warn("recording execution history", "entries", len(entries), "error", err)
			}
		}
		for _, b := range batch {
			if b.flushed != nil {
				close(b.flushed)
			}
		}
	}
}

// SetLogger names where history write failures are reported.
func (s *BoltStore) SetLogger(l *slog.Logger) {
	if l != nil {
		s.hist.log.Store(l)
	}
}

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

// AddHistory queues an execution record; it is stored in the background. Code, output and error are cut to
// MaxHistoryField bytes each (Truncated says so).
func (s *BoltStore) AddHistory(e *HistoryEntry) error {
	if _, err := s.open(); err != nil {
		return err
	}
	c := *e
	if len(c.Trace) > MaxTraceBytes || len(c.Trace) > 0 && c.PayloadRef == nil {
		return fmt.Errorf("recording execution %s: a trace of %d bytes (at most %d, and only under a payload_ref)", c.ID, len(c.Trace), MaxTraceBytes)
	}
	c.Code = capField(c.Code, &c.Truncated)
	for _, f := range []**string{&c.Output, &c.Error, &c.Description, &c.Tags, &c.Notes} {
		if *f != nil && len(**f) > MaxHistoryField {
			v := capField(**f, &c.Truncated)
			*f = &v
		}
	}
	return s.hist.enqueue(histOp{entry: &c})
}

func putHistory(db *bolt.DB, entries []*HistoryEntry) error {
	return db.Update(func(tx *bolt.Tx) error {
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
			if err := sb.Put(historyKey(seq), b); err != nil {
				return err
			}
			if e.AwaitsLearning() { // store_learn.go
				if err := setLearnQueued(tx, e.SandboxID, historyKey(seq), true); err != nil {
					return err
				}
			}
			if err := putTrace(tx, e, seq); err != nil {
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
				if err := dropEntryTrace(tx, e.SandboxID, k, sb.Get(k)); err != nil {
					return err
				}
				if err := setLearnQueued(tx, e.SandboxID, k, false); err != nil {
					return err
				}
				if err := sb.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func historyKey(seq uint64) []byte { return []byte(fmt.Sprintf("%020d", seq)) }

// openHistory opens the file and waits for the queued history: a client reads its own writes.
func (s *BoltStore) openHistory() (*bolt.DB, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	if err := s.hist.flush(); err != nil {
		return nil, err
	}
	return db, nil
}

// History returns a sandbox's entries, newest first.
func (s *BoltStore) History(sandboxID string) ([]*HistoryEntry, error) {
	page, _, err := s.HistoryPage(sandboxID, nil, 0, MaxHistoryEntries+1)
	return page, err
}

// HistoryPage returns the entries matching keep (nil: all), newest first, skipping offset and returning at most
// limit, with the number that matched. Entries are decoded one at a time: only the page is held.
func (s *BoltStore) HistoryPage(sandboxID string, keep func(*HistoryEntry) bool, offset, limit int) ([]*HistoryEntry, int, error) {
	db, err := s.openHistory()
	if err != nil {
		return nil, 0, err
	}
	out := []*HistoryEntry{}
	total := 0
	err = db.View(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucketHistory).Bucket([]byte(sandboxID))
		if sb == nil {
			return nil
		}
		c := sb.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			s.hist.decoded.Add(1)
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
func (s *BoltStore) HistorySandboxes() ([]string, error) {
	db, err := s.openHistory()
	if err != nil {
		return nil, err
	}
	var ids []string
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHistory).ForEachBucket(func(k []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}

// UpdateHistory applies fn to one entry and stores it; it reports false when there is no such entry.
func (s *BoltStore) UpdateHistory(sandboxID, id string, fn func(*HistoryEntry)) (*HistoryEntry, bool, error) {
	db, err := s.openHistory()
	if err != nil {
		return nil, false, err
	}
	var found *HistoryEntry
	err = s.update(db, func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucketHistory).Bucket([]byte(sandboxID))
		if sb == nil {
			return nil
		}
		c := sb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			found, err = s.rewriteHistory(tx, sb, sandboxID, id, k, v, fn)
			if found != nil || err != nil {
				return err
			}
		}
		return nil
	})
	return found, found != nil, err
}

// rewriteHistory applies fn to the entry stored at k (value v) of sandboxID's bucket sb, and stores it, when it is
// entry id; it answers the entry as stored, nil when k holds another.
func (s *BoltStore) rewriteHistory(tx *bolt.Tx, sb *bolt.Bucket, sandboxID, id string, k, v []byte, fn func(*HistoryEntry)) (*HistoryEntry, error) {
	s.hist.decoded.Add(1)
	var h storedHistory
	if err := json.Unmarshal(v, &h); err != nil {
		return nil, fmt.Errorf("decoding history entry %s: %w", k, err)
	}
	if h.ID != id {
		return nil, nil
	}
	h.HistoryEntry.SandboxID = h.Sandbox
	fn(&h.HistoryEntry)
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	e := h.HistoryEntry
	k = append([]byte(nil), k...) // bbolt keeps a Put's key until the commit, and k may be a cursor's
	// An edit may end (a run learned) or start (a mark set back to pending) its wait for the learning pass.
	if err := setLearnQueued(tx, sandboxID, k, e.AwaitsLearning()); err != nil {
		return nil, err
	}
	return &e, sb.Put(k, b)
}

// DropHistory forgets a deleted sandbox's history.
func (s *BoltStore) DropHistory(sandboxID string) error {
	db, err := s.openHistory()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error {
		if err := dropTraces(tx, sandboxID); err != nil {
			return err
		}
		if err := dropLearnQueue(tx, sandboxID); err != nil {
			return err
		}
		err := tx.Bucket(bucketHistory).DeleteBucket([]byte(sandboxID))
		if errors.Is(err, bolterrors.ErrBucketNotFound) {
			return nil
		}
		return err
	})
}
