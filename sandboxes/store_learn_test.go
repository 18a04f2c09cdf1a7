package sandboxes

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// learnEntry is a browser batch of sandbox sb recorded with learn on: pending for the learning pass.
func learnEntry(id, sb string, at time.Time) *HistoryEntry {
	pending := LearnStatusPending
	return &HistoryEntry{ID: id, SandboxID: sb, ExecType: "browser_batch", LearnEnabled: true, LearnStatus: &pending, CreatedAt: at}
}

// queuedSandboxes lists the sandboxes that have a bucket in the learn queue.
func queuedSandboxes(t *testing.T, st *BoltStore) []string {
	t.Helper()
	db, err := st.openHistory()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLearnQueue).ForEachBucket(func(k []byte) error { ids = append(ids, string(k)); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// pendingIDs reads the learn queue and answers the entries' ids and how many stored entries the read decoded.
func pendingIDs(t *testing.T, st *BoltStore) ([]string, uint64) {
	t.Helper()
	if _, err := st.openHistory(); err != nil { // what was queued before is stored: the count is the read's alone
		t.Fatal(err)
	}
	before := st.HistoryEntriesRead()
	got, err := st.PendingLearn()
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, e := range got {
		ids = append(ids, e.SandboxID+"/"+e.ID)
	}
	return ids, st.HistoryEntriesRead() - before
}

func setLearnStatus(t *testing.T, st *BoltStore, sb, id, status string) {
	t.Helper()
	if _, ok, err := st.UpdateHistory(sb, id, func(e *HistoryEntry) { e.LearnStatus = &status }); err != nil || !ok {
		t.Fatalf("marking %s %s: %v %v", id, status, ok, err)
	}
}

// TestLearnQueue: the learn queue names exactly the entries waiting to be learned, a read of it decodes those
// entries only (none once they are learned, however long the history), it follows marks set back to pending, it
// survives reopening the file, and a dropped sandbox leaves nothing in it.
func TestLearnQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st := NewBoltStore(path)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(e *HistoryEntry) {
		t.Helper()
		if err := st.AddHistory(e); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		add(&HistoryEntry{ID: fmt.Sprintf("exec-%03d", i), SandboxID: "sb-a", ExecType: "shell", CreatedAt: at})
	}
	add(learnEntry("run-a1", "sb-a", at))
	add(learnEntry("run-a2", "sb-a", at))
	add(learnEntry("run-b1", "sb-b", at))
	skipped := "skipped"
	add(&HistoryEntry{ID: "run-b2", SandboxID: "sb-b", ExecType: "browser", LearnStatus: &skipped, CreatedAt: at})
	noStatus := learnEntry("run-b3", "sb-b", at) // learn asked, no mark yet: pending too, as the pass has it
	noStatus.LearnStatus = nil
	add(noStatus)
	notBrowser := learnEntry("run-b4", "sb-b", at)
	notBrowser.ExecType = "python"
	add(notBrowser)

	want := []string{"sb-a/run-a2", "sb-a/run-a1", "sb-b/run-b3", "sb-b/run-b1"}
	if ids, read := pendingIDs(t, st); !slices.Equal(ids, want) || read != 4 {
		t.Fatalf("pending %v after decoding %d entries, want %v after 4", ids, read, want)
	}
	// Marking a run learned through the queue reads the sandbox's waiting runs, not its 300 other entries.
	processed := "processed"
	mark := func(e *HistoryEntry) { e.LearnStatus = &processed }
	for _, id := range []string{"run-a1", "run-a2"} {
		before := st.HistoryEntriesRead()
		if e, ok, err := st.UpdatePendingLearn("sb-a", id, mark); err != nil || !ok || e.ID != id || *e.LearnStatus != processed {
			t.Fatalf("marking %s through the queue: %+v %v %v", id, e, ok, err)
		}
		if read := st.HistoryEntriesRead() - before; read > 2 {
			t.Fatalf("marking %s read %d entries, want at most the 2 waiting", id, read)
		}
	}
	if _, ok, err := st.UpdatePendingLearn("sb-a", "run-a1", mark); ok || err != nil {
		t.Fatalf("a run no longer waiting was found in the queue: %v %v", ok, err)
	}
	setLearnStatus(t, st, "sb-b", "run-b1", "error")
	setLearnStatus(t, st, "sb-b", "run-b3", "skipped")
	if ids, read := pendingIDs(t, st); len(ids) != 0 || read != 0 {
		t.Fatalf("pending %v after decoding %d entries, want none after 0", ids, read)
	}
	if q := queuedSandboxes(t, st); len(q) != 0 {
		t.Fatalf("learn queue buckets %v left with nothing pending", q)
	}

	// A mark set back to pending (a pass that stopped between its records and its mark) is waiting again.
	setLearnStatus(t, st, "sb-a", "run-a1", LearnStatusPending)
	add(learnEntry("run-b5", "sb-b", at))
	want = []string{"sb-a/run-a1", "sb-b/run-b5"}
	if ids, read := pendingIDs(t, st); !slices.Equal(ids, want) || read != 2 {
		t.Fatalf("pending %v after decoding %d entries, want %v after 2", ids, read, want)
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = NewBoltStore(path)
	defer st.Close()
	if ids, read := pendingIDs(t, st); !slices.Equal(ids, want) || read != 2 {
		t.Fatalf("after reopening: pending %v after decoding %d entries, want %v after 2", ids, read, want)
	}

	if err := st.DropHistory("sb-b"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := pendingIDs(t, st); !slices.Equal(ids, []string{"sb-a/run-a1"}) {
		t.Fatalf("after dropping sb-b: pending %v", ids)
	}
	if q := queuedSandboxes(t, st); !slices.Equal(q, []string{"sb-a"}) {
		t.Fatalf("learn queue buckets %v after dropping sb-b, want [sb-a]", q)
	}
	if err := st.DropHistory("sb-a"); err != nil {
		t.Fatal(err)
	}
	if q := queuedSandboxes(t, st); len(q) != 0 {
		t.Fatalf("learn queue buckets %v after dropping every sandbox", q)
	}
}

// TestLearnQueueTrim: a pending run trimmed out of its sandbox's history (past MaxHistoryEntries) leaves the queue.
func TestLearnQueueTrim(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "s.db"))
	defer st.Close()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	entries := []*HistoryEntry{learnEntry("run-old", "sb", at)}
	for i := range MaxHistoryEntries - 1 {
		entries = append(entries, &HistoryEntry{ID: fmt.Sprintf("exec-%04d", i), SandboxID: "sb", ExecType: "shell", CreatedAt: at})
	}
	for _, e := range entries {
		if err := st.AddHistory(e); err != nil {
			t.Fatal(err)
		}
	}
	if ids, _ := pendingIDs(t, st); !slices.Equal(ids, []string{"sb/run-old"}) {
		t.Fatalf("pending %v with a full history", ids)
	}
	if err := st.AddHistory(&HistoryEntry{ID: "exec-last", SandboxID: "sb", ExecType: "shell", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if ids, read := pendingIDs(t, st); len(ids) != 0 || read != 0 {
		t.Fatalf("pending %v (decoding %d) after the run was trimmed", ids, read)
	}
	if q := queuedSandboxes(t, st); len(q) != 0 {
		t.Fatalf("learn queue buckets %v after the trim", q)
	}
}

// TestLearnQueueBuiltOnOpen: a file written before the learn queue existed (history, no queue bucket) gets its queue
// built from the history when the store opens it.
func TestLearnQueueBuiltOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st := NewBoltStore(path)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range []*HistoryEntry{learnEntry("run-1", "sb", at), {ID: "exec-1", SandboxID: "sb", ExecType: "shell", CreatedAt: at}, learnEntry("run-2", "sb", at)} {
		if err := st.AddHistory(e); err != nil {
			t.Fatal(err)
		}
	}
	setLearnStatus(t, st, "sb", "run-1", "processed")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketLearnQueue) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st = NewBoltStore(path)
	defer st.Close()
	if ids, _ := pendingIDs(t, st); !slices.Equal(ids, []string{"sb/run-2"}) {
		t.Fatalf("pending %v in the queue built on open, want [sb/run-2]", ids)
	}
}
