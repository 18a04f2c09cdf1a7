package sandboxes

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiskWatchWarnsBeforeFull fills a 4 MiB tmpfs past the warning ratio: the check logs one warning naming the
// disk (not one per check), reports it over the ratio, and notes when the space returns.
func TestDiskWatchWarnsBeforeFull(t *testing.T) {
	dir := smallDataDir(t, "4m")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	w := NewDiskWatch(0.5)
	w.Watch("data", dir)
	w.Watch("elsewhere", filepath.Join(dir, "missing")) // not measurable: left out
	if r := w.Check(log); len(r) != 1 || r[0].Over || logs.Len() != 0 {
		t.Fatalf("empty disk: %+v, logged %q", r, logs.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := w.Check(log)
		if len(r) != 1 || !r[0].Over || r[0].Used < 0.5 || r[0].Free > 2<<20 {
			t.Fatalf("disk 3/4 full: %+v", r)
		}
	}
	if n := strings.Count(logs.String(), "nearly full"); n != 1 || !strings.Contains(logs.String(), "disk=data") {
		t.Fatalf("want one warning for the data disk, logged %q", logs.String())
	}
	if m := w.Measure(); len(m) != 1 || !m[0].Over {
		t.Fatalf("measure: %+v", m)
	}
	if err := os.Remove(filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	if r := w.Check(log); r[0].Over || !strings.Contains(logs.String(), "has room again") {
		t.Fatalf("after freeing: %+v, logged %q", r, logs.String())
	}
}
