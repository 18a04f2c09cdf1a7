package sandboxes

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestHistoryQueue checks that queued history is read back in order right away and survives Close and reopen.
func TestHistoryQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.db")
	st := NewBoltStore(path)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 300 {
		if err := st.AddHistory(&HistoryEntry{ID: fmt.Sprintf("exec-%03d", i), SandboxID: "sandbox-a", ExecType: "shell", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.History("sandbox-a")
	if err != nil || len(got) != 300 || got[0].ID != "exec-299" || got[299].ID != "exec-000" {
		t.Fatalf("read after write: %d entries, %v", len(got), err)
	}
	st.AddHistory(&HistoryEntry{ID: "exec-last", SandboxID: "sandbox-a", CreatedAt: at})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = NewBoltStore(path)
	defer st.Close()
	got, _ = st.History("sandbox-a")
	if len(got) != 301 || got[0].ID != "exec-last" || got[0].SandboxID != "sandbox-a" {
		t.Fatalf("after reopen: %d entries, first %+v", len(got), got[0])
	}
	if err := st.DropHistory("sandbox-a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.History("sandbox-a"); len(got) != 0 {
		t.Errorf("dropped history still has %d entries", len(got))
	}
}
