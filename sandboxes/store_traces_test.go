package sandboxes

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestStoreTraces: a trace is stored with its entry and found by its sandbox and ref (not through another
// sandbox); the ref index names its sandbox; a sandbox keeps the traces of its newest MaxTracedEntries executions
// (older entries stay, naming a trace that is gone), trimming an entry past MaxHistoryEntries drops its trace and
// index, and so does dropping the sandbox's history; a trace over MaxTraceBytes, or one without a ref, is refused.
func TestStoreTraces(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "api.db"))
	defer st.Close()
	ref := func(i int) *string { r := fmt.Sprintf("blob:blob-%012d", i); return &r }
	add := func(sb string, i int) {
		t.Helper()
		if err := st.AddHistory(&HistoryEntry{ID: fmt.Sprintf("exec-%d", i), SandboxID: sb, ExecType: "browser", PayloadRef: ref(i),
			Trace: []byte(fmt.Sprintf(`{"kind":"browser_exec_trace","n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	add("sb-a", 0)
	add("sb-b", 1)
	if b, ok, err := st.Trace("sb-a", *ref(0)); err != nil || !ok || string(b) != `{"kind":"browser_exec_trace","n":0}` {
		t.Fatalf("sb-a's trace: %s %v %v", b, ok, err)
	}
	if _, ok, _ := st.Trace("sb-b", *ref(0)); ok {
		t.Errorf("sb-a's trace read through sb-b")
	}
	if id, ok, err := st.TraceSandbox(*ref(1)); err != nil || !ok || id != "sb-b" {
		t.Errorf("index: %q %v %v", id, ok, err)
	}
	for i := 2; i <= MaxTracedEntries; i++ { // sb-a's entries 0, 2..MaxTracedEntries: MaxTracedEntries of them
		add("sb-a", i)
	}
	if _, ok, _ := st.Trace("sb-a", *ref(0)); !ok {
		t.Fatalf("a trace within the newest %d executions is gone", MaxTracedEntries)
	}
	add("sb-a", MaxTracedEntries+1) // entry 0 is now MaxTracedEntries executions back
	if _, ok, _ := st.Trace("sb-a", *ref(0)); ok {
		t.Errorf("a trace %d executions back is kept", MaxTracedEntries)
	}
	if _, ok, _ := st.Trace("sb-a", *ref(2)); !ok {
		t.Errorf("the next trace went too")
	}
	if page, _, _ := st.HistoryPage("sb-a", func(e *HistoryEntry) bool { return e.ID == "exec-0" }, 0, 1); len(page) != 1 || *page[0].PayloadRef != *ref(0) {
		t.Errorf("the entry whose trace went: %v", page)
	}
	for i := MaxTracedEntries + 2; i < MaxHistoryEntries+2; i++ { // pushes entry 0 out of sb-a's newest MaxHistoryEntries
		add("sb-a", i)
	}
	if _, ok, _ := st.Trace("sb-a", *ref(0)); ok {
		t.Errorf("the trimmed entry's trace is kept")
	}
	if _, ok, _ := st.TraceSandbox(*ref(0)); ok {
		t.Errorf("the trimmed entry's index is kept")
	}
	if _, ok, _ := st.Trace("sb-a", *ref(MaxHistoryEntries + 1)); !ok {
		t.Errorf("the newest trace is gone")
	}
	if err := st.DropHistory("sb-a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Trace("sb-a", *ref(MaxHistoryEntries)); ok {
		t.Errorf("a dropped sandbox's trace is kept")
	}
	if _, ok, _ := st.TraceSandbox(*ref(MaxHistoryEntries)); ok {
		t.Errorf("a dropped sandbox's index is kept")
	}
	if _, ok, _ := st.Trace("sb-b", *ref(1)); !ok {
		t.Errorf("another sandbox's trace went with it")
	}
	if err := st.AddHistory(&HistoryEntry{ID: "exec-big", SandboxID: "sb-b", PayloadRef: ref(9), Trace: make([]byte, MaxTraceBytes+1)}); err == nil {
		t.Errorf("an oversized trace was accepted")
	}
	if err := st.AddHistory(&HistoryEntry{ID: "exec-noref", SandboxID: "sb-b", Trace: []byte(`{}`)}); err == nil {
		t.Errorf("a trace without a ref was accepted")
	}
}
