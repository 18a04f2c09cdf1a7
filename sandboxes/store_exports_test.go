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
// sweep removes those of deleted sandboxes and those past DefaultExportTTL, and indexes the rest, which then count towards
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
		{SandboxID: "sb-live", Path: "stale", Owner: "alice", ExportedAt: now.Add(-DefaultExportTTL - time.Hour)},
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
	if len(es) != 1 || es[0].Path != "keep" || !es[0].ExpiresAt.Equal(old[0].ExportedAt.Add(DefaultExportTTL)) {
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
	later := now.Add(DefaultExportTTL)
	if err := st.PutExports([]Export{{SandboxID: "sb-live", Path: "new", Owner: "alice", ExportedAt: later}}, ExportLimits{MaxPerOwner: 1}); err != nil {
		t.Errorf("an expired export still counts: %v", err)
	}
	if es, _ := st.Exports("sb-live"); len(es) != 1 || es[0].Path != "new" {
		t.Errorf("after the quota check's pruning: %+v", es)
	}
}

// TestExportTTLFromLimits: a registration expires ExportLimits.TTL after it was made (recorded with it, in its value
// and its index entry), and an index entry written before the TTL could be set (16 bytes) expires
// DefaultExportTTL after its time, as its registration does.
func TestExportTTLFromLimits(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "store.db"))
	defer st.Close()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	short := ExportLimits{MaxPerOwner: 1, TTL: time.Hour}
	if err := st.PutExports([]Export{{SandboxID: "sb-a", Path: "x", Owner: "alice", ExportedAt: now}}, short); err != nil {
		t.Fatal(err)
	}
	e, err := st.Export("sb-a", "x")
	if err != nil || e == nil || !e.ExpiresAt.Equal(now.Add(time.Hour)) || e.Expired(now.Add(59*time.Minute)) || !e.Expired(now.Add(time.Hour)) {
		t.Fatalf("registration under a 1h TTL: %+v %v", e, err)
	}
	// Still live: it counts.
	err = st.PutExports([]Export{{SandboxID: "sb-a", Path: "y", Owner: "alice", ExportedAt: now.Add(59 * time.Minute)}}, short)
	if ErrorCode(err) != CodeQuotaExceeded {
		t.Fatalf("a live registration did not count: %v", err)
	}
	// Past the hour the quota check prunes it.
	if err := st.PutExports([]Export{{SandboxID: "sb-a", Path: "y", Owner: "alice", ExportedAt: now.Add(time.Hour)}}, short); err != nil {
		t.Fatalf("an expired registration still counts: %v", err)
	}
	if es, _ := st.Exports("sb-a"); len(es) != 1 || es[0].Path != "y" {
		t.Fatalf("after pruning: %+v", es)
	}

	// An index entry of the old 16-byte form.
	size, exp := parseExportIndex(exportIndex(10, now, now.Add(time.Hour))[:16])
	if size != 10 || !exp.Equal(now.Add(DefaultExportTTL)) {
		t.Errorf("old index entry: size %d expires %v", size, exp)
	}
	if _, exp := parseExportIndex([]byte{1, 2, 3}); !exp.IsZero() {
		t.Errorf("a damaged index entry expires at %v", exp)
	}
	if got := (ExportLimits{}).ExpiresAt(now); !got.Equal(now.Add(DefaultExportTTL)) {
		t.Errorf("default expiry %v", got)
	}
}
