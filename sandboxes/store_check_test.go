package sandboxes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// filledStore writes n records into a new store at dir/sandgate.db, closes it and returns its path.
func filledStore(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "sandgate.db")
	st := NewBoltStore(path)
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{ID: fmt.Sprintf("sb-%04d", i), Profile: "p", Phase: PhaseRunning,
			Env: map[string]string{"PAD": strings.Repeat("x", 600)}}
	}
	if err := st.PutMany(recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	st := NewBoltStore(path)
	defer st.Close()
	recs, err := st.Load()
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r.ID] = true
	}
	return ids
}

// bucketRootPage is the page holding the root of the sandboxes bucket, and the page size.
func bucketRootPage(t *testing.T, path string) (page int64, size int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		page = int64(tx.Bucket(bucketSandboxes).Root())
		return nil
	})
	if err != nil || page == 0 {
		t.Fatalf("sandboxes bucket root: page %d, %v", page, err)
	}
	return page, db.Info().PageSize
}

// TestStoreRefusesADamagedFile damages a store in each way a disk or a crash can and opens it: the open fails with
// a *StoreCorruptError naming the file and the newest backup, never panics, and leaves the file as it was (an
// empty or truncated file is not re-initialised into an empty store).
func TestStoreRefusesADamagedFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		reason string
	}{
		{"empty", func(t *testing.T, path string) { must(t, os.Truncate(path, 0)) }, "empty"},
		{"truncated to half", func(t *testing.T, path string) {
			info, err := os.Stat(path)
			must(t, err)
			must(t, os.Truncate(path, info.Size()/2))
		}, "truncated"},
		{"truncated inside the header", func(t *testing.T, path string) { must(t, os.Truncate(path, 100)) }, "bbolt cannot read it"},
		{"garbage", func(t *testing.T, path string) {
			info, err := os.Stat(path)
			must(t, err)
			must(t, os.WriteFile(path, garbage(int(info.Size())), 0o600))
		}, "bbolt cannot read it"},
		{"one page corrupted", func(t *testing.T, path string) {
			page, size := bucketRootPage(t, path)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			must(t, err)
			_, err = f.WriteAt(garbage(size), page*int64(size))
			must(t, errors.Join(err, f.Close()))
		}, "page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filledStore(t, t.TempDir(), 300)
			st := NewBoltStore(path)
			backup, err := st.Backup(time.Now(), 3)
			must(t, err)
			must(t, st.Close())
			tc.damage(t, path)
			before, err := os.ReadFile(path)
			must(t, err)

			_, err = NewBoltStore(path).Load()
			var ce *StoreCorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("opening a damaged store: %v, want a *StoreCorruptError", err)
			}
			if ce.Path != path || ce.Backup != backup || !strings.Contains(strings.ToLower(ce.Reason), tc.reason) {
				t.Fatalf("error names %q, backup %q, reason %q; want %q, %q and a reason with %q", ce.Path, ce.Backup, ce.Reason, path, backup, tc.reason)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "copy the newest backup "+backup) {
				t.Fatalf("message does not say what to restore: %s", msg)
			}
			after, err := os.ReadFile(path)
			must(t, err)
			if !bytes.Equal(before, after) {
				t.Fatalf("the failed open changed the file: %d bytes before, %d after", len(before), len(after))
			}
			// The restore the message describes: copy the backup over the store, and every record is back.
			b, err := os.ReadFile(backup)
			must(t, err)
			must(t, os.WriteFile(path, b, 0o600))
			if ids := loadIDs(t, path); len(ids) != 300 || !ids["sb-0000"] || !ids["sb-0299"] {
				t.Fatalf("restored store holds %d records", len(ids))
			}
		})
	}
}

// TestStoreDamagedWithoutBackup: with no backup beside it, the message says so and how to start afresh.
func TestStoreDamagedWithoutBackup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandgate.db")
	must(t, os.WriteFile(path, nil, 0o600))
	_, err := NewBoltStore(path).Load()
	var ce *StoreCorruptError
	if !errors.As(err, &ce) || ce.Backup != "" || !strings.Contains(err.Error(), "no backup") {
		t.Fatalf("empty store without backup: %v", err)
	}
}

// TestStoreNewFileIsNeverEmpty: a new store appears at its path already initialised, so the empty-file refusal
// cannot hit a store that was being created.
func TestStoreNewFileIsNeverEmpty(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sandgate", "new.db")
	st := NewBoltStore(path)
	must(t, st.SetMeta("k", "v"))
	must(t, st.Close())
	info, err := os.Stat(path)
	must(t, err)
	if info.Size() == 0 {
		t.Fatal("the new store is empty")
	}
	left, _ := filepath.Glob(filepath.Join(dir, "sandgate", "*.init-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	st = NewBoltStore(path)
	defer st.Close()
	if v, err := st.Meta("k"); err != nil || v != "v" {
		t.Fatalf("reopened: %q, %v", v, err)
	}
}

// TestStoreBackupsRotate writes more backups than kept: the newest keep remain, a crashed backup's temporary file
// is removed, the store keeps working while they are written, and the newest opens as a store with the records.
func TestStoreBackupsRotate(t *testing.T) {
	path := filledStore(t, t.TempDir(), 20)
	st := NewBoltStore(path)
	defer st.Close()
	stale := path + backupInfix + "20000101T000000.000000000Z.tmp"
	must(t, os.WriteFile(stale, []byte("half"), 0o600))
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var made []string
	for i := range 5 {
		must(t, st.Put(Record{ID: fmt.Sprintf("sb-new-%d", i), Phase: PhaseRunning}))
		p, err := st.Backup(base.Add(time.Duration(i)*time.Minute), 3)
		must(t, err)
		made = append(made, p)
	}
	got, err := StoreBackups(path)
	must(t, err)
	if fmt.Sprint(got) != fmt.Sprint(made[2:]) {
		t.Fatalf("backups kept: %v, want the newest three %v", got, made[2:])
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temporary backup still there: %v", err)
	}
	if newest, _ := NewestStoreBackup(path); newest != made[4] {
		t.Fatalf("newest backup %q, want %q", newest, made[4])
	}
	restored := filepath.Join(t.TempDir(), "restored.db")
	b, err := os.ReadFile(made[4])
	must(t, err)
	must(t, os.WriteFile(restored, b, 0o600))
	ids := loadIDs(t, restored)
	if len(ids) != 25 || !ids["sb-new-4"] || !ids["sb-0019"] {
		t.Fatalf("the newest backup holds %d records", len(ids))
	}
	if _, err := st.Backup(base, 0); err == nil {
		t.Fatal("a backup keeping none was accepted")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestManagerRefusesToStartOnADamagedStore: the Manager (and so the gateway) does not start on a truncated store,
// and says which backup to restore; restored, it starts with every sandbox.
func TestManagerRefusesToStartOnADamagedStore(t *testing.T) {
	path := filledStore(t, t.TempDir(), 50)
	st := NewBoltStore(path)
	backup, err := st.Backup(time.Now(), 3)
	must(t, err)
	must(t, st.Close())
	info, err := os.Stat(path)
	must(t, err)
	must(t, os.Truncate(path, info.Size()/2))

	d := newFakeDriver(t)
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(path), nil)
	must(t, err)
	must(t, m.Apply(context.Background(), Config{Profiles: []Profile{testProfile("p")}}))
	err = m.Start(context.Background())
	var ce *StoreCorruptError
	if !errors.As(err, &ce) || ce.Backup != backup {
		t.Fatalf("starting on a truncated store: %v, want a *StoreCorruptError naming %s", err, backup)
	}
	m.Close()

	b, err := os.ReadFile(backup)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o600))
	m = startTestManager(t, d, path, Config{Profiles: []Profile{testProfile("p")}})
	if _, err := m.Get(context.Background(), "sb-0049"); err != nil {
		t.Fatalf("a sandbox of the restored store: %v", err)
	}
}
