package sandboxes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// legacyFixture is a bayapi.db written by the API's own store before it moved into the one store (routes/bayapi
// at fb6d6dd: OpenStore, PutKey, AddHistory, UpdateHistory, PutCargo, putExports): two keys (one revoked), three
// history entries of two sandboxes (one patched with notes), an external and a managed cargo, one export.
const legacyFixture = "testdata/bayapi-v1.db"

// copyLegacy puts a fresh copy of the fixture into dir, named as the API named its file.
func copyLegacy(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(legacyFixture)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LegacyAPIStoreFile)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func keyHash(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// TestImportAPIStore: the one store takes over an old bayapi.db whole (keys, history with its order and edits,
// cargos, exports), sets the file aside, keeps recording history after the imported entries, survives a reopen,
// and a second import of the same file (a crash before the rename) changes nothing.
func TestImportAPIStore(t *testing.T) {
	dir := t.TempDir()
	legacy := copyLegacy(t, dir)
	storePath := filepath.Join(dir, "sandgate", "sandgate.db")
	st := NewBoltStore(storePath)
	defer func() { st.Close() }()
	// The one store already holds a sandbox and a key of its own: both must survive.
	if err := st.Put(Record{ID: "sandbox-cccccccccccc", Profile: "p", Phase: PhaseRunning}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutKey(StoredKey{Hash: keyHash("sk-new"), Owner: "carol", Active: true}); err != nil {
		t.Fatal(err)
	}

	// As the gateway starts: the data dir's bayapi.db, logged when imported.
	var logs bytes.Buffer
	if err := st.ImportLegacyAPIStore(filepath.Dir(legacy), slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("import: %v", err)
	}
	if !strings.Contains(logs.String(), "imported the API's old store") || !strings.Contains(logs.String(), "set_aside_as="+legacy+".migrated") {
		t.Errorf("the import was not logged: %s", logs.String())
	}
	if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old store is still at %s: %v", legacy, err)
	}
	if _, err := os.Stat(legacy + ".migrated"); err != nil {
		t.Errorf("the old store was not set aside: %v", err)
	}
	if again, err := st.ImportAPIStore(legacy); again || err != nil {
		t.Errorf("a second start imported again: %v %v", again, err)
	}

	check := func(st *BoltStore, stage string, entriesOfA int) {
		t.Helper()
		keys, err := st.ActiveKeys()
		if err != nil {
			t.Fatal(err)
		}
		owners := map[string]string{}
		for _, k := range keys {
			owners[k.Hash] = k.Owner
		}
		if len(keys) != 2 || owners[keyHash("sk-legacy-generated")] != "default" || owners[keyHash("sk-new")] != "carol" {
			t.Errorf("%s: active keys %+v", stage, keys)
		}
		h, err := st.History("sandbox-aaaaaaaaaaaa")
		if err != nil || len(h) != entriesOfA {
			t.Fatalf("%s: history of a: %d entries, %v", stage, len(h), err)
		}
		h = h[len(h)-2:] // the imported ones, oldest last
		if h[0].ID != "exec-000000000002" || h[1].ID != "exec-000000000001" {
			t.Fatalf("%s: history of a: %s, %s", stage, h[0].ID, h[1].ID)
		}
		if h[0].Notes == nil || *h[0].Notes != "division by zero, on purpose" || h[0].Error == nil || *h[0].Error != "boom" ||
			h[0].SandboxID != "sandbox-aaaaaaaaaaaa" || !h[0].CreatedAt.Equal(time.Date(2026, 11, 20, 10, 0, 1, 0, time.UTC)) {
			t.Errorf("%s: patched entry %+v", stage, h[0])
		}
		ids, err := st.HistorySandboxes()
		if err != nil || len(ids) != 2 {
			t.Errorf("%s: sandboxes with history %v %v", stage, ids, err)
		}
		cargos, err := st.Cargos()
		if err != nil || len(cargos) != 2 || cargos[0].ID != "ws-0123456789ab" || cargos[0].Managed || cargos[0].SizeLimitMB != 256 ||
			!cargos[1].Managed || cargos[1].ManagedBySandboxID == nil || *cargos[1].ManagedBySandboxID != "sandbox-aaaaaaaaaaaa" {
			t.Errorf("%s: cargos %+v %v", stage, cargos, err)
		}
		ex, err := st.Export("sandbox-aaaaaaaaaaaa", "out/report.csv")
		if err != nil || ex == nil || ex.Owner != "default" {
			t.Errorf("%s: export %+v %v", stage, ex, err)
		}
		recs, err := st.Load()
		if err != nil || len(recs) != 1 || recs[0].ID != "sandbox-cccccccccccc" {
			t.Errorf("%s: sandboxes %+v %v", stage, recs, err)
		}
	}
	check(st, "after import", 2)

	// New history of an imported sandbox sorts after the imported entries (the bucket's sequence came along).
	if err := st.AddHistory(&HistoryEntry{ID: "exec-000000000009", SandboxID: "sandbox-aaaaaaaaaaaa", ExecType: "shell"}); err != nil {
		t.Fatal(err)
	}
	if h, _ := st.History("sandbox-aaaaaaaaaaaa"); len(h) != 3 || h[0].ID != "exec-000000000009" {
		t.Fatalf("new entry after the imported ones: %+v", h)
	}
	if _, ok, err := st.UpdateHistory("sandbox-aaaaaaaaaaaa", "exec-000000000009", func(e *HistoryEntry) {
		d := "after the import"
		e.Description = &d
	}); !ok || err != nil {
		t.Fatal(ok, err)
	}

	// A rerun over the same file (as after a crash between the commit and the rename) keeps every value.
	if err := os.Rename(legacy+".migrated", legacy); err != nil {
		t.Fatal(err)
	}
	if imported, err := st.ImportAPIStore(legacy); err != nil || !imported {
		t.Fatalf("rerun: %v %v", imported, err)
	}
	if h, _ := st.History("sandbox-aaaaaaaaaaaa"); len(h) != 3 || h[0].Description == nil || *h[0].Description != "after the import" {
		t.Fatalf("a rerun changed the history: %+v", h)
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = NewBoltStore(storePath)
	check(st, "after reopen", 3)
}

// TestImportAPIStoreMissing: a fresh install has nothing to import.
func TestImportAPIStoreMissing(t *testing.T) {
	dir := t.TempDir()
	st := NewBoltStore(filepath.Join(dir, "s.db"))
	defer st.Close()
	if imported, err := st.ImportAPIStore(filepath.Join(dir, LegacyAPIStoreFile)); imported || err != nil {
		t.Fatalf("%v %v", imported, err)
	}
}

// TestImportAPIStoreIsThisStore: with namespace "bayapi" in the default data dir the old file's name is this
// store's own: nothing is imported, nothing renamed.
func TestImportAPIStoreIsThisStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), LegacyAPIStoreFile)
	st := NewBoltStore(path)
	defer st.Close()
	if err := st.PutKey(StoredKey{Hash: "h", Active: true}); err != nil {
		t.Fatal(err)
	}
	if imported, err := st.ImportAPIStore(path); imported || err != nil {
		t.Fatalf("%v %v", imported, err)
	}
	if keys, err := st.ActiveKeys(); err != nil || len(keys) != 1 {
		t.Fatalf("the store after: %v %v", keys, err)
	}
}

// TestImportAPIStoreCorrupt: a file that is not a bbolt store is refused with an error naming it, and left where it
// is for the operator.
func TestImportAPIStoreCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LegacyAPIStoreFile)
	if err := os.WriteFile(path, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := NewBoltStore(filepath.Join(dir, "s.db"))
	defer st.Close()
	if _, err := st.ImportAPIStore(path); err == nil {
		t.Fatal("a corrupt file was imported")
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the corrupt file was moved: %v", err)
	}
}

// TestStoreClosedHistory: recording history on a closed store is an error, never a panic (a request of a config
// being unloaded may still finish after its Manager closed).
func TestStoreClosedHistory(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "s.db"))
	if err := st.AddHistory(&HistoryEntry{ID: "exec-1", SandboxID: "sb"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.AddHistory(&HistoryEntry{ID: "exec-2", SandboxID: "sb"}); err == nil {
		t.Error("history recorded on a closed store")
	}
	if _, _, err := st.HistoryPage("sb", nil, 0, 10); err == nil {
		t.Error("history read from a closed store")
	}
}
