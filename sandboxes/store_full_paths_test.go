package sandboxes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The writes of the store outside update and batch (store_full.go) on a full data disk: the history writer, the
// import of an old API store, and a create whose record write meets a disk that filled after its Writable check.

// TestHistoryWriteOnFullDiskMarksStoreFull: the background history writer used to log a write that met a full
// disk and leave the store marked writable. It now notes the failure as every other write does (the store is
// full, so Writable probes), and the first write that works once space returns clears it.
func TestHistoryWriteOnFullDiskMarksStoreFull(t *testing.T) {
	dir := smallDataDir(t, "4m")
	path := filepath.Join(dir, "sandgate.db")
	st := NewBoltStore(path)
	out := strings.Repeat("o", MaxHistoryField)
	add := func() {
		t.Helper()
		if err := st.AddHistory(&HistoryEntry{ID: "e", SandboxID: "sb-1", Code: "true", Output: &out, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := st.hist.flush(); err != nil {
			t.Fatal(err)
		}
	}
	add()
	filler := fill(t, dir)
	// History writes until one meets the full disk (the first may land in pages bbolt freed earlier).
	for i := 0; !st.full.Load(); i++ {
		if i > 200 {
			t.Fatal("200 history writes of 64 KiB on a full 4 MiB disk, and the store is not marked full")
		}
		add()
	}
	wantStorageFull(t, "Writable after a history write failed", st.Writable())
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := st.Writable(); err != nil {
		t.Fatalf("Writable once space returned: %v", err)
	}
	add()
	if st.full.Load() {
		t.Fatal("the store is still marked full after a history write worked")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := checkStoreFile(path); err != nil {
		t.Fatalf("the store is damaged after the full disk: %v", err)
	}
}

// TestImportAPIStoreOnFullDisk: importing an old API store into a store whose disk is full fails with the typed
// storage_full, marks the store full and leaves the old file where it was; once space returns the import works.
func TestImportAPIStoreOnFullDisk(t *testing.T) {
	dir := smallDataDir(t, "2m")
	legacy := copyLegacy(t, t.TempDir())
	st := NewBoltStore(filepath.Join(dir, "sandgate.db"))
	defer st.Close()
	if _, err := st.ActiveKeys(); err != nil { // opens the file
		t.Fatal(err)
	}
	filler := fill(t, dir)
	imported, err := st.ImportAPIStore(legacy)
	wantStorageFull(t, "importing the old API store", err)
	if imported || !st.full.Load() {
		t.Fatalf("imported %v, store marked full %v", imported, st.full.Load())
	}
	if _, err := os.Stat(legacy); err != nil {
		t.Fatalf("the old store was set aside though the import failed: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if imported, err := st.ImportAPIStore(legacy); !imported || err != nil {
		t.Fatalf("import once space returned: %v %v", imported, err)
	}
	if st.full.Load() {
		t.Error("the store is still marked full after the import worked")
	}
}

// fillingStore is a BoltStore whose disk fills between a create's Writable check and its record write: while
// armed, Put fails as a commit that met ENOSPC does (through noteWrite, so the store is marked full), once
// ready says the launch has made what the create must clean up.
type fillingStore struct {
	*BoltStore
	armed atomic.Bool
	ready func() bool
}

func (s *fillingStore) Put(r Record) error {
	if !s.armed.Load() {
		return s.BoltStore.Put(r)
	}
	for deadline := time.Now().Add(10 * time.Second); !s.ready() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return s.noteWrite(&os.PathError{Op: "write", Path: s.path, Err: syscall.ENOSPC})
}

// TestCreateRecordWriteOnFullDisk: a create whose record write met a full disk used to log it and answer the
// sandbox, which the store never held (lost at the next start, its container and volume left behind). It now
// fails with storage_full and removes what its launch made, for a cold create and for a warm claim; the next
// create, once space returns, works.
func TestCreateRecordWriteOnFullDisk(t *testing.T) {
	for _, warm := range []bool{false, true} {
		name := "cold"
		if warm {
			name = "warm"
		}
		t.Run(name, func(t *testing.T) {
			d := newFakeDriver(t)
			st := &fillingStore{BoltStore: NewBoltStore(filepath.Join(t.TempDir(), "store.db"))}
			p := testProfile("p")
			if warm {
				p.WarmPoolSize = 1
			}
			m := startManagerOn(t, d, st, Config{Profiles: []Profile{p}})
			ctx := context.Background()
			var claimed Record
			if warm {
				waitFor(t, func() bool {
					m.mu.RLock()
					defer m.mu.RUnlock()
					for _, e := range m.entries {
						if e.rec.Warm && e.rec.Phase == PhaseRunning {
							claimed = e.rec
							return true
						}
					}
					return false
				})
				st.ready = func() bool { return true }
			} else {
				// The launch runs beside the create: the disk "fills" once it has made its container and volume.
				st.ready = func() bool { c, v := d.count(); return c == 1 && v == 1 }
			}
			st.armed.Store(true)
			_, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "alice"})
			st.armed.Store(false)
			wantStorageFull(t, "create", err)
			if list, _, err := m.List(ctx, ListOptions{Owner: "alice"}); err != nil || len(list) != 0 {
				t.Fatalf("the refused create's sandbox is listed: %+v %v", list, err)
			}
			d.mu.Lock()
			if warm {
				if _, ok := d.containers[claimed.ContainerID]; ok {
					t.Error("the claimed warm member's container was left")
				}
				if _, ok := d.volumes[m.VolumeName(claimed.WorkspaceID)]; ok {
					t.Error("the claimed warm member's workspace volume was left")
				}
			} else if len(d.containers) != 0 || len(d.volumes) != 0 {
				t.Errorf("the refused create left %d containers and %d volumes", len(d.containers), len(d.volumes))
			}
			d.mu.Unlock()
			// Space is back (the disk never really filled; the remove's own store write cleared the mark the failed
			// write set): the next create works.
			if err := st.Writable(); err != nil {
				t.Fatalf("Writable once space returned: %v", err)
			}
			sb, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "alice"})
			if err != nil {
				t.Fatalf("create once space returned: %v", err)
			}
			if rec, err := st.BoltStore.Load(); err != nil || !hasRecord(rec, sb.ID) {
				t.Fatalf("the new sandbox's record: %v", err)
			}
		})
	}
}

func hasRecord(recs []Record, id string) bool {
	for _, r := range recs {
		if r.ID == id {
			return true
		}
	}
	return false
}
