package sandboxes

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHistoryLimits: one huge cell is stored cut to MaxHistoryField with the flag set; a sandbox keeps only its
// newest MaxHistoryEntries; pages hold only what was asked for.
func TestHistoryLimits(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "api.db"))
	defer st.Close()
	huge := strings.Repeat("é", 3*MaxHistoryField) // multi-byte: the cut must stay valid UTF-8
	st.AddHistory(&HistoryEntry{ID: "exec-huge", SandboxID: "sb-a", ExecType: "python", Code: huge, Output: &huge, Error: &huge})
	got, err := st.History("sb-a")
	if err != nil || len(got) != 1 {
		t.Fatalf("%d entries, %v", len(got), err)
	}
	e := got[0]
	if !e.Truncated || len(e.Code) > MaxHistoryField || len(*e.Output) > MaxHistoryField || len(*e.Error) > MaxHistoryField ||
		!strings.HasPrefix(huge, *e.Output) || strings.ToValidUTF8(*e.Output, "?") != *e.Output {
		t.Fatalf("stored %d/%d/%d bytes, truncated=%v", len(e.Code), len(*e.Output), len(*e.Error), e.Truncated)
	}
	for i := range MaxHistoryEntries + 50 {
		st.AddHistory(&HistoryEntry{ID: fmt.Sprintf("exec-%04d", i), SandboxID: "sb-a", ExecType: "shell", Success: i%2 == 0})
	}
	page, total, err := st.HistoryPage("sb-a", nil, 0, 10)
	if err != nil || total != MaxHistoryEntries || len(page) != 10 || page[0].ID != fmt.Sprintf("exec-%04d", MaxHistoryEntries+49) {
		t.Fatalf("after %d entries: total %d, page %d, %v", MaxHistoryEntries+51, total, len(page), err)
	}
	page, total, _ = st.HistoryPage("sb-a", func(e *HistoryEntry) bool { return e.Success }, 495, 10)
	if total != MaxHistoryEntries/2 || len(page) != 5 {
		t.Fatalf("filtered page: total %d, page %d", total, len(page))
	}
}

type reapSource struct {
	mu    sync.Mutex
	alive map[string]bool
	ch    chan Event
}

func (r *reapSource) Subscribe(int) (<-chan Event, func()) { return r.ch, func() {} }

func (r *reapSource) Get(_ context.Context, id string) (*Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.alive[id] {
		return nil, Errorf(CodeNotFound, "sandbox %s not found", id)
	}
	return &Sandbox{ID: id}, nil
}

// TestHistoryReaper: history goes with its sandbox on a deleted event (any deletion path: TTL expiry, console,
// admin), and a periodic sweep drops the history of sandboxes deleted while nobody listened. A live sandbox's
// history stays.
func TestHistoryReaper(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "api.db"))
	defer st.Close()
	for _, id := range []string{"sb-live", "sb-expired", "sb-missed"} {
		st.AddHistory(&HistoryEntry{ID: "exec-" + id, SandboxID: id, ExecType: "shell"})
	}
	src := &reapSource{alive: map[string]bool{"sb-live": true, "sb-expired": true}, ch: make(chan Event, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.ReapHistory(ctx, src, 50*time.Millisecond, nil) }()
	defer func() { cancel(); <-done }()
	has := func(id string) bool {
		h, _ := st.History(id)
		return len(h) > 0
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("a sweep to drop sb-missed", func() bool { return !has("sb-missed") })
	src.mu.Lock()
	src.alive["sb-expired"] = false
	src.mu.Unlock()
	src.ch <- Event{Type: EventDeleted, SandboxID: "sb-expired", Reason: "expired"}
	waitFor("the deleted event to drop sb-expired", func() bool { return !has("sb-expired") })
	if !has("sb-live") {
		t.Fatal("a live sandbox's history was removed")
	}
}
