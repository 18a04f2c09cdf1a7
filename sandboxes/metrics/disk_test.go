package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestDiskMetrics: /metrics carries the watched disks' free bytes, used ratio and warning flag.
func TestDiskMetrics(t *testing.T) {
	w := sandboxes.NewDiskWatch(0.9)
	w.Watch("data", t.TempDir())
	reg := prometheus.NewRegistry()
	reg.MustRegister(newDiskCollector(w))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "disk" && l.GetValue() == "data" {
					seen[f.GetName()] = true
				}
			}
		}
	}
	for _, name := range []string{"sandgate_disk_free_bytes", "sandgate_disk_used_ratio", "sandgate_disk_warning"} {
		if !seen[name] {
			t.Errorf("no %s for the data disk in %v", name, seen)
		}
	}
}
