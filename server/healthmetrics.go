package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/stream"
)

// storageHealth is implemented by a storage that can say whether its
// components can write (the stream core; not the in-memory fake).
type storageHealth interface {
	Health() []stream.ComponentHealth
}

// healthCollector exports the storage's per-component health at scrape
// time: nereus_storage_degraded{component} is 1 while the component cannot
// make appends durable, nereus_storage_degraded_seconds how long that has
// lasted, and nereus_storage_recoveries_total how many degraded periods
// ended.
type healthCollector struct {
	storage                     storageHealth
	degraded, seconds, recovers *prometheus.Desc
}

func newHealthCollector(s storageHealth) *healthCollector {
	l := []string{"component"}
	return &healthCollector{storage: s,
		degraded: prometheus.NewDesc("nereus_storage_degraded", "1 while the storage component cannot make appends durable (appends fail with a retriable error; it recovers by itself).", l, nil),
		seconds:  prometheus.NewDesc("nereus_storage_degraded_seconds", "How long the current degraded period of the component has lasted (0 when healthy).", l, nil),
		recovers: prometheus.NewDesc("nereus_storage_recoveries_total", "Degraded periods of the component that ended.", l, nil),
	}
}

func (hc *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hc.degraded
	ch <- hc.seconds
	ch <- hc.recovers
}

func (hc *healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range hc.storage.Health() {
		d, secs := 0.0, 0.0
		if c.Degraded {
			d = 1
			if !c.Since.IsZero() {
				secs = time.Since(c.Since).Seconds()
			}
		}
		ch <- prometheus.MustNewConstMetric(hc.degraded, prometheus.GaugeValue, d, c.Component)
		ch <- prometheus.MustNewConstMetric(hc.seconds, prometheus.GaugeValue, secs, c.Component)
		ch <- prometheus.MustNewConstMetric(hc.recovers, prometheus.CounterValue, float64(c.Recoveries), c.Component)
	}
}
