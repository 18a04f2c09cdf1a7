package docker

import (
	"strings"
	"testing"
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
