package sandboxes

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestExportsGoWithTheirSandbox is the attack of issue 33: exports outlived their sandbox. Whatever deletes a
// sandbox ends in the store's Delete, which drops its exports in the same transaction, index entries included.
func TestExportsGoWithTheirSandbox(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "store.db"))
	m := startManagerOn(t, newFakeDriver(t), st, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.PutExports([]Export{{SandboxID: sb.ID, Path: "a", Owner: "alice", ExportedAt: now},
		{SandboxID: sb.ID, Path: "b/c", Owner: "alice", ExportedAt: now}}, ExportLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if es, err := st.Exports(sb.ID); err != nil || len(es) != 0 {
		t.Fatalf("exports of a deleted sandbox: %v %v", es, err)
	}
	if n := countBucket(t, st, bucketExportsByOwner); n != 0 {
		t.Errorf("%d index entries left", n)
	}
}

func countBucket(t *testing.T, st *BoltStore, name []byte) int {
	t.Helper()
	db, err := st.open()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(name); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n
}

// TestExportSweepUpgradesOldStore: a store written before exports were bounded has entries with no index. The
// sweep removes those of deleted sandboxes and those past ExportTTL, and indexes the rest, which then count towards
// their owner's bound.
func TestExportSweepUpgradesOldStore(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "store.db"))
	defer st.Close()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	db, err := st.open()
	if err != nil {
		t.Fatal(err)
	}
	old := []Export{
		{SandboxID: "sb-live", Path: "keep", Owner: "alice", ExportedAt: now.Add(-time.Hour)},
		{SandboxID: "sb-live", Path: "stale", Owner: "alice", ExportedAt: now.Add(-ExportTTL - time.Hour)},
		{SandboxID: "sb-gone", Path: "orphan", Owner: "alice", ExportedAt: now.Add(-time.Hour)},
	}
	if err := db.Update(func(tx *bolt.Tx) error { // the old layout: the exports bucket alone
		b, err := tx.CreateBucketIfNotExists(bucketExports)
		if err != nil {
			return err
		}
		for _, e := range old {
			v, _ := json.Marshal(e)
			if err := b.Put(exportKey(e.SandboxID, e.Path), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n, err := st.SweepExports(now, func(id string) bool { return id == "sb-live" })
	if err != nil || n != 2 {
		t.Fatalf("sweep removed %d: %v", n, err)
	}
	es, _ := st.Exports("sb-live")
	if len(es) != 1 || es[0].Path != "keep" || !es[0].ExpiresAt.Equal(old[0].ExportedAt.Add(ExportTTL)) {
		t.Fatalf("left: %+v", es)
	}
	if es, _ := st.Exports("sb-gone"); len(es) != 0 {
		t.Errorf("a deleted sandbox's exports stayed: %+v", es)
	}
	err = st.PutExports([]Export{{SandboxID: "sb-live", Path: "new", Owner: "alice", ExportedAt: now}}, ExportLimits{MaxPerOwner: 1})
	var se *Error
	if !errors.As(err, &se) || se.Code != CodeQuotaExceeded {
		t.Errorf("an indexed old export does not count: %v", err)
	}
	// Once it expires, it no longer counts and is pruned by the quota check itself.
	later := now.Add(ExportTTL)
	if err := st.PutExports([]Export{{SandboxID: "sb-live", Path: "new", Owner: "alice", ExportedAt: later}}, ExportLimits{MaxPerOwner: 1}); err != nil {
		t.Errorf("an expired export still counts: %v", err)
	}
	if es, _ := st.Exports("sb-live"); len(es) != 1 || es[0].Path != "new" {
		t.Errorf("after the quota check's pruning: %+v", es)
	}
}
