package sandboxes

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// TestStartStoreLoops: the loops write the first backup at once, watch the data dir's disk, and stop when asked
// (stop waits for both loops to end).
func TestStartStoreLoops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandgate.db")
	st := NewBoltStore(path)
	defer st.Close()
	st.AddHistory(&HistoryEntry{ID: "exec-1", SandboxID: "sb-1", ExecType: "shell"}) // opens the file
	disks := NewDiskWatch(0)
	stop := StartStoreLoops(st, nil, time.Hour, 2, disks, slog.New(slog.DiscardHandler))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := StoreBackups(path); len(b) == 1 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatal("no backup written at start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if r := disks.Measure(); len(r) != 1 || r[0].Name != "data" {
		t.Errorf("disks watched: %+v, want the data dir's", r)
	}
	stopReaper := StartHistoryReaper(st, &reapSource{alive: map[string]bool{}, ch: make(chan Event)}, nil)
	stopReaper() // returns once the reaper ended
}
