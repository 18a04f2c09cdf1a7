package sandboxes

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Browser traces (Bay's trace_ref, a blob:blob-... ref) are stored with the execution they record: written in the
// history writer's transaction with their entry, kept for the sandbox's newest MaxTracedEntries executions (the
// entry itself stays, naming a trace that is gone) and dropped with the sandbox's history. A trace is tenant-produced content (a page's
// text, a script's result), so it is bounded (MaxTraceBytes, cut by sandboxes/service before it gets here) and
// reachable only through the sandbox it belongs to, whose owner the service checks.

// MaxTraceBytes bounds one stored trace; MaxTracedEntries bounds how far back a sandbox's traces go (in
// executions), so one sandbox's traces take at most MaxTraceBytes*MaxTracedEntries (25 MiB).
const (
	MaxTraceBytes    = 256 << 10
	MaxTracedEntries = 100
)

// traceOrder is the nested bucket of a sandbox's traces that lists them by their entry's history key (oldest
// first); no ref can be this key (refs are blob:...).
var traceOrder = []byte("\x00order")

var (
	// bucketTraces is nested like the history: one bucket per sandbox id, keyed by the trace's ref.
	bucketTraces = []byte("traces")
	// bucketTraceRefs indexes a ref to its sandbox id, so a ref alone (Bay's payload routes) finds its sandbox.
	bucketTraceRefs = []byte("trace_refs")
)

// putTrace stores e's trace under its PayloadRef, in the transaction that stores e as the sandbox's seq-th entry,
// and drops the traces of entries MaxTracedEntries or more before it.
func putTrace(tx *bolt.Tx, e *HistoryEntry, seq uint64) error {
	if e.PayloadRef == nil || len(e.Trace) == 0 {
		return nil
	}
	tb, err := tx.CreateBucketIfNotExists(bucketTraces)
	if err != nil {
		return err
	}
	sb, err := tb.CreateBucketIfNotExists([]byte(e.SandboxID))
	if err != nil {
		return err
	}
	if err := sb.Put([]byte(*e.PayloadRef), e.Trace); err != nil {
		return err
	}
	ix, err := tx.CreateBucketIfNotExists(bucketTraceRefs)
	if err != nil {
		return err
	}
	if err := ix.Put([]byte(*e.PayloadRef), []byte(e.SandboxID)); err != nil {
		return err
	}
	order, err := sb.CreateBucketIfNotExists(traceOrder)
	if err != nil {
		return err
	}
	if err := order.Put(historyKey(seq), []byte(*e.PayloadRef)); err != nil {
		return err
	}
	for {
		k, ref := order.Cursor().First()
		n, perr := strconv.ParseUint(string(k), 10, 64)
		if k == nil || perr != nil || seq-n < MaxTracedEntries {
			return nil
		}
		if err := errors.Join(sb.Delete(ref), ix.Delete(ref), order.Delete(k)); err != nil {
			return err
		}
	}
}

// dropEntryTrace removes the trace of a stored history entry (its key and JSON) that is being trimmed.
func dropEntryTrace(tx *bolt.Tx, sandboxID string, key, stored []byte) error {
	var ref struct {
		PayloadRef *string `json:"payload_ref"`
	}
	if stored == nil || json.Unmarshal(stored, &ref) != nil || ref.PayloadRef == nil {
		return nil
	}
	if sb := sandboxTraces(tx, sandboxID); sb != nil {
		if err := sb.Delete([]byte(*ref.PayloadRef)); err != nil {
			return err
		}
		if order := sb.Bucket(traceOrder); order != nil {
			if err := order.Delete(key); err != nil {
				return err
			}
		}
	}
	if ix := tx.Bucket(bucketTraceRefs); ix != nil {
		return ix.Delete([]byte(*ref.PayloadRef))
	}
	return nil
}

// sandboxTraces is the bucket of a sandbox's traces, nil when it has none.
func sandboxTraces(tx *bolt.Tx, sandboxID string) *bolt.Bucket {
	tb := tx.Bucket(bucketTraces)
	if tb == nil {
		return nil
	}
	return tb.Bucket([]byte(sandboxID))
}

// dropTraces removes every trace of a sandbox, with their index entries.
func dropTraces(tx *bolt.Tx, sandboxID string) error {
	sb := sandboxTraces(tx, sandboxID)
	if sb == nil {
		return nil
	}
	if ix := tx.Bucket(bucketTraceRefs); ix != nil {
		if err := sb.ForEach(func(k, v []byte) error {
			if v == nil { // the order bucket
				return nil
			}
			return ix.Delete(k)
		}); err != nil {
			return err
		}
	}
	err := tx.Bucket(bucketTraces).DeleteBucket([]byte(sandboxID))
	if errors.Is(err, bolterrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

// Trace returns the trace stored under ref for a sandbox; false when there is none (never recorded, trimmed, or
// another sandbox's).
func (s *BoltStore) Trace(sandboxID, ref string) ([]byte, bool, error) {
	db, err := s.openHistory()
	if err != nil {
		return nil, false, err
	}
	var out []byte
	err = db.View(func(tx *bolt.Tx) error {
		sb := sandboxTraces(tx, sandboxID)
		if sb == nil {
			return nil
		}
		if v := sb.Get([]byte(ref)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading trace %s: %w", ref, err)
	}
	return out, out != nil, nil
}

// TraceSandbox names the sandbox a stored trace belongs to; false when no trace has that ref.
func (s *BoltStore) TraceSandbox(ref string) (string, bool, error) {
	db, err := s.openHistory()
	if err != nil {
		return "", false, err
	}
	var id string
	err = db.View(func(tx *bolt.Tx) error {
		if ix := tx.Bucket(bucketTraceRefs); ix != nil {
			id = string(ix.Get([]byte(ref)))
		}
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("finding trace %s: %w", ref, err)
	}
	return id, id != "", nil
}
