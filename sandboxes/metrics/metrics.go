// Package metrics reports a Manager to Prometheus: sandboxes by status, creates and their launch types, warm
// pools, deaths and recoveries (counted from the Manager's events), and the disks the gateway depends on. The
// collectors live as long as the Manager, so counters survive Caddy's reloads; each config registers them in its
// own registry (caddymodule/app.go).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandgate/sandgate/sandboxes"
)

// Metrics are one Manager's collectors.
type Metrics struct {
	byStatus   *prometheus.GaugeVec
	creates    *prometheus.CounterVec
	claim      prometheus.Histogram
	coldStart  prometheus.Histogram
	gc         *prometheus.CounterVec
	deaths     *prometheus.CounterVec
	recoveries *prometheus.CounterVec
	crashLoops prometheus.Counter
	refill     prometheus.Histogram
	backoffs   *prometheus.CounterVec
	collectors []prometheus.Collector
	mgr        *sandboxes.Manager
}

type statusCollector struct{ m *Metrics }

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) { c.m.byStatus.Describe(ch) }
func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.byStatus.Reset()
	for _, s := range []string{"idle", "starting", "ready", "failed", "expired", "warm"} {
		c.m.byStatus.WithLabelValues(s).Set(0)
	}
	for s, n := range c.m.mgr.Stats() {
		c.m.byStatus.WithLabelValues(s).Set(float64(n))
	}
	c.m.byStatus.Collect(ch)
}

// poolCollector reads every warm pool's state at scrape time (sandboxes.Manager.WarmPools).
type poolCollector struct {
	mgr                                             *sandboxes.Manager
	target, size, hits, misses, prestarted, concurr *prometheus.Desc
}

func newPoolCollector(mgr *sandboxes.Manager, ns, sub string) poolCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, sub, name), help, labels, nil)
	}
	return poolCollector{mgr: mgr,
		target:     d("warm_pool_target", "Members the warm pool aims to hold: peak creates within one cold start, times headroom, within [warm_pool, warm_pool_max].", "profile"),
		size:       d("warm_pool_size", "Warm-pool members, ready to claim or still starting.", "profile", "state"),
		hits:       d("warm_pool_hits_total", "Creates served by a ready warm member.", "profile"),
		misses:     d("warm_pool_misses_total", "Creates the warm pool could not serve (cold creates).", "profile"),
		prestarted: d("warm_pool_prestarted_total", "Creates served by a warm member that was still starting.", "profile"),
		concurr:    d("warm_refill_concurrency", "Refills run at once: the level the engine measurably sustains best."),
	}
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.target, c.size, c.hits, c.misses, c.prestarted, c.concurr} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	pools, conc := c.mgr.WarmPools()
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(c.target, prometheus.GaugeValue, float64(p.Target), p.Profile)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(p.Ready), p.Profile, "ready")
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(p.Starting), p.Profile, "starting")
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(p.Hits), p.Profile)
		ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(p.Misses), p.Profile)
		ch <- prometheus.MustNewConstMetric(c.prestarted, prometheus.CounterValue, float64(p.Prestarted), p.Profile)
	}
	ch <- prometheus.MustNewConstMetric(c.concurr, prometheus.GaugeValue, float64(conc))
}

// New builds the collectors of mgr and of the disks it watches (nil: none).
func New(mgr *sandboxes.Manager, disks *sandboxes.DiskWatch) *Metrics {
	const ns, sub = "sandgate", "sandboxes"
	m := &Metrics{mgr: mgr,
		byStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "count",
			Help: "Sandboxes by status (warm: unclaimed warm-pool members)."}, []string{"status"}),
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "creates_total",
			Help: "Sandboxes created, by launch type (warm claim or cold create)."}, []string{"launch_type"}),
		claim: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "warm_claim_seconds",
			Help: "Time to claim a warm sandbox.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		coldStart: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "cold_start_seconds",
			Help: "Time from create (or restart) to the agent's readiness.", Buckets: prometheus.ExponentialBuckets(0.05, 1.6, 14)}),
		gc: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "gc_total",
			Help: "Things the collector stopped or removed, by reason."}, []string{"reason"}),
		deaths: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deaths_total",
			Help: "Sandbox containers that died, by reason."}, []string{"reason"}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "recoveries_total",
			Help: "Dead sandboxes rebuilt on their workspace, by the death's reason."}, []string{"reason"}),
		crashLoops: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "crash_loops_total",
			Help: "Sandboxes left failed after dying more often than their profile's crash limit."}),
		refill: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "warm_refill_seconds",
			Help: "Time from a warm refill's launch to its readiness.", Buckets: prometheus.ExponentialBuckets(0.05, 1.6, 14)}),
		backoffs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "warm_backoffs_total",
			Help: "Warm refills that failed and paused their pool's refills."}, []string{"profile"}),
	}
	m.collectors = []prometheus.Collector{statusCollector{m}, m.creates, m.claim, m.coldStart, m.gc, m.deaths, m.recoveries, m.crashLoops,
		m.refill, m.backoffs, newPoolCollector(mgr, ns, sub)}
	if disks != nil {
		m.collectors = append(m.collectors, newDiskCollector(disks))
	}
	return m
}

// Follow updates the counters from the Manager's events until the returned function is called.
func (m *Metrics) Follow() func() {
	ch, unsubscribe := m.mgr.Subscribe(1024)
	go func() {
		for ev := range ch {
			switch ev.Type {
			case sandboxes.EventCreated:
				m.creates.WithLabelValues(ev.LaunchType).Inc()
				if ev.LaunchType == sandboxes.LaunchWarm {
					m.claim.Observe(ev.Duration.Seconds())
				}
			case sandboxes.EventReady:
				if !ev.Warm {
					m.coldStart.Observe(ev.Duration.Seconds())
				} else if ev.Reason == "" {
					m.refill.Observe(ev.Duration.Seconds())
				}
			case sandboxes.EventWarmBackoff:
				m.backoffs.WithLabelValues(ev.Profile).Inc()
			case sandboxes.EventGC:
				m.gc.WithLabelValues(ev.Reason).Inc()
			case sandboxes.EventDied:
				m.deaths.WithLabelValues(ev.Reason).Inc()
			case sandboxes.EventRecovering:
				m.recoveries.WithLabelValues(ev.Reason).Inc()
			case sandboxes.EventFailed:
				if ev.Reason == "crash_loop" {
					m.crashLoops.Inc()
				}
			}
		}
	}()
	return unsubscribe
}

// Register adds the collectors to reg (nil: nothing); ones registered already are kept.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			if _, dup := err.(prometheus.AlreadyRegisteredError); !dup {
				return err
			}
		}
	}
	return nil
}

// Unregister takes the collectors out of reg (nil: nothing).
func (m *Metrics) Unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.collectors {
		reg.Unregister(c)
	}
}
