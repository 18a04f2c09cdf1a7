package sandboxes

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The learn queue indexes the history entries waiting for the browser learning pass (sandboxes/service's
// skills_learn.go), so a pass reads those entries only, not every sandbox's whole history: with nothing new
// recorded, a pass reads no entry at all. It is kept in the history's own transactions (putHistory, UpdateHistory,
// the trim of old entries, DropHistory), so it is exactly the set of stored entries for which AwaitsLearning holds,
// after a crash (kill -9) as after a clean stop: bbolt commits it with the entry or not at all.
//
// bucketLearnQueue is nested: one bucket per sandbox id holding the history keys (sequence numbers) of its entries
// waiting to be learned, with empty values. A sandbox's bucket is removed when its last key goes, so a sandbox with
// nothing pending, or deleted, costs nothing. A store written before the queue existed has no bucket; the store
// builds it from the history once, when it opens the file (and again after importing an old API store).
var bucketLearnQueue = []byte("learnq")

// LearnStatusPending is the learn_status of a browser run waiting to be learned (Bay's "pending").
const LearnStatusPending = "pending"

// AwaitsLearning reports whether e is a browser run waiting for the learning pass: learning was asked for, and the
// run is not learned yet (no status, or pending).
func (e *HistoryEntry) AwaitsLearning() bool {
	return e.LearnEnabled && (e.ExecType == "browser" || e.ExecType == "browser_batch") &&
		(e.LearnStatus == nil || *e.LearnStatus == LearnStatusPending)
}

// setLearnQueued puts (queued) or removes history key k of sandboxID in the learn queue.
func setLearnQueued(tx *bolt.Tx, sandboxID string, k []byte, queued bool) error {
	root := tx.Bucket(bucketLearnQueue)
	if root == nil {
		return fmt.Errorf("the learn queue bucket is missing")
	}
	if queued {
		b, err := root.CreateBucketIfNotExists([]byte(sandboxID))
		if err != nil {
			return fmt.Errorf("learn queue of %s: %w", sandboxID, err)
		}
		// bbolt keeps the key's bytes until the commit: a copy, as the caller's may be a cursor's.
		return b.Put(append([]byte(nil), k...), []byte{})
	}
	b := root.Bucket([]byte(sandboxID))
	if b == nil {
		return nil
	}
	if err := b.Delete(k); err != nil {
		return err
	}
	if first, _ := b.Cursor().First(); first == nil {
		return root.DeleteBucket([]byte(sandboxID))
	}
	return nil
}

// dropLearnQueue forgets everything sandboxID had waiting (the sandbox's history is being removed).
func dropLearnQueue(tx *bolt.Tx, sandboxID string) error {
	root := tx.Bucket(bucketLearnQueue)
	if root == nil || root.Bucket([]byte(sandboxID)) == nil {
		return nil
	}
	return root.DeleteBucket([]byte(sandboxID))
}

// buildLearnQueue makes the learn queue anew from the whole history: once per store file, or after an import. An
// entry that does not decode is left out (a pass could not learn it either).
func buildLearnQueue(tx *bolt.Tx) error {
	if tx.Bucket(bucketLearnQueue) != nil {
		if err := tx.DeleteBucket(bucketLearnQueue); err != nil {
			return err
		}
	}
	if _, err := tx.CreateBucket(bucketLearnQueue); err != nil {
		return err
	}
	hist := tx.Bucket(bucketHistory)
	if hist == nil {
		return nil
	}
	return hist.ForEachBucket(func(id []byte) error {
		return hist.Bucket(id).ForEach(func(k, v []byte) error {
			var h storedHistory
			if v == nil || json.Unmarshal(v, &h) != nil || !h.AwaitsLearning() {
				return nil
			}
			return setLearnQueued(tx, string(id), k, true)
		})
	})
}

// PendingLearn returns every stored entry waiting for the learning pass (AwaitsLearning), by sandbox id in byte
// order and newest first within a sandbox, with SandboxID set. It reads only the entries the learn queue names.
func (s *BoltStore) PendingLearn() ([]*HistoryEntry, error) {
	db, err := s.openHistory()
	if err != nil {
		return nil, err
	}
	var out []*HistoryEntry
	err = db.View(func(tx *bolt.Tx) error {
		root, hist := tx.Bucket(bucketLearnQueue), tx.Bucket(bucketHistory)
		if root == nil || hist == nil {
			return nil
		}
		return root.ForEachBucket(func(id []byte) error {
			sb := hist.Bucket(id)
			if sb == nil {
				return nil // the queue and the history are dropped together; nothing to read
			}
			c := root.Bucket(id).Cursor()
			for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
				v := sb.Get(k)
				if v == nil {
					continue
				}
				s.hist.decoded.Add(1)
				var h storedHistory
				if err := json.Unmarshal(v, &h); err != nil {
					return fmt.Errorf("decoding history entry %s of %s: %w", k, id, err)
				}
				h.HistoryEntry.SandboxID = h.Sandbox
				if !h.AwaitsLearning() {
					continue
				}
				e := h.HistoryEntry
				out = append(out, &e)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading the learn queue: %w", err)
	}
	return out, nil
}

// UpdatePendingLearn is UpdateHistory for an entry waiting to be learned: it looks for entry id among sandboxID's
// entries in the learn queue only, so marking a run learned reads the runs still waiting, not the whole history.
// It reports false when the entry is not waiting (another pass marked it, or it is gone).
func (s *BoltStore) UpdatePendingLearn(sandboxID, id string, fn func(*HistoryEntry)) (*HistoryEntry, bool, error) {
	db, err := s.openHistory()
	if err != nil {
		return nil, false, err
	}
	var found *HistoryEntry
	err = s.update(db, func(tx *bolt.Tx) error {
		q, sb := tx.Bucket(bucketLearnQueue).Bucket([]byte(sandboxID)), tx.Bucket(bucketHistory).Bucket([]byte(sandboxID))
		if q == nil || sb == nil {
			return nil
		}
		c := q.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			v := sb.Get(k)
			if v == nil {
				continue
			}
			found, err = s.rewriteHistory(tx, sb, sandboxID, id, append([]byte(nil), k...), v, fn)
			if found != nil || err != nil {
				return err
			}
		}
		return nil
	})
	return found, found != nil, err
}

// HistoryEntriesRead is how many stored history entries this store has decoded since it was made (every read of
// the history counts the entries it looks at): what a read of the history costs, for tests and benchmarks.
func (s *BoltStore) HistoryEntriesRead() uint64 { return s.hist.decoded.Load() }
