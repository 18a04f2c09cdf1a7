package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandgate/sandgate/sandboxes"
)

// diskCollector reports the watched disks at scrape time: free bytes, the used fraction, and 1 when a disk is at
// or past the warning ratio.
type diskCollector struct {
	disks            *sandboxes.DiskWatch
	free, used, warn *prometheus.Desc
}

func newDiskCollector(disks *sandboxes.DiskWatch) diskCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("sandgate", "disk", name), help, []string{"disk", "path"}, nil)
	}
	return diskCollector{disks: disks,
		free: d("free_bytes", "Free bytes on a disk the gateway depends on: data (its store) or engine (the engine's data root)."),
		used: d("used_ratio", "Used fraction of a disk the gateway depends on."),
		warn: d("warning", "1 when a disk the gateway depends on is at or past the warning ratio (store disk_warn)."),
	}
}

func (c diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.free
	ch <- c.used
	ch <- c.warn
}

func (c diskCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.disks.Measure() {
		over := 0.0
		if r.Over {
			over = 1
		}
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(r.Free), r.Name, r.Path)
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, r.Used, r.Name, r.Path)
		ch <- prometheus.MustNewConstMetric(c.warn, prometheus.GaugeValue, over, r.Name, r.Path)
	}
}
