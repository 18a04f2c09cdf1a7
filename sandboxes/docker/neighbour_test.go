package docker

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

func TestCheckNeighbourTable(t *testing.T) {
	for _, c := range []struct {
		thresh3 int
		warns   bool
	}{
		{0, false},    // unknown: not Linux, no /proc
		{-1, false},   // unknown
		{1024, true},  // the kernel's default: about 512 running sandboxes
		{2045, true},  // one short of a full network
		{2046, false}, // one full network of 1023
		{8192, false}, // the suggested setting
	} {
		w := CheckNeighbourTable(c.thresh3)
		if (w != "") != c.warns {
			t.Errorf("gc_thresh3 %d: warning %q, want one: %v", c.thresh3, w, c.warns)
		}
		if w != "" && (!strings.Contains(w, "net.ipv4.neigh.default.gc_thresh3") || !strings.Contains(w, "gc_thresh3=8192")) {
			t.Errorf("gc_thresh3 %d: the warning names neither the setting nor a value that lifts it: %q", c.thresh3, w)
		}
	}
}

// TestCheckReportsTheNeighbourTable runs the driver's Check on the real engine: its warnings carry the neighbour
// table's whenever this host's setting caps density.
func TestCheckReportsTheNeighbourTable(t *testing.T) {
	testenv.Integration(t)
	d, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	warnings, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := CheckNeighbourTable(neighbourLimit())
	t.Logf("gc_thresh3 %d; warnings %q", neighbourLimit(), warnings)
	if want != "" && !slices.Contains(warnings, want) {
		t.Fatalf("Check's warnings %q lack the neighbour table's %q", warnings, want)
	}
	for _, w := range warnings {
		if want == "" && strings.Contains(w, "gc_thresh3") {
			t.Fatalf("Check warns about the neighbour table although gc_thresh3 is %d: %q", neighbourLimit(), w)
		}
	}
}
