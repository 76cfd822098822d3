package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/objectstore/walstore"
)

// walStoreCollector exports the Object WAL log store's counters
// (walstore.Stats) at scrape time.
type walStoreCollector struct {
	store *walstore.Store
	descs []*prometheus.Desc
}

var walStoreMetrics = []struct {
	name, help string
	get        func(walstore.Stats) float64
	gauge      bool
}{
	{"nereus_walstore_files", "Log files of the Object WAL's log store.", func(s walstore.Stats) float64 { return float64(s.Files) }, true},
	{"nereus_walstore_file_bytes", "Bytes written to the log store's files (records and headers).", func(s walstore.Stats) float64 { return float64(s.FileBytes) }, true},
	{"nereus_walstore_live_bytes", "Bytes of the live objects' records.", func(s walstore.Stats) float64 { return float64(s.LiveBytes) }, true},
	{"nereus_walstore_objects", "Live objects (segments and manifests).", func(s walstore.Stats) float64 { return float64(s.Objects) }, true},
	{"nereus_walstore_puts_total", "Objects written.", func(s walstore.Stats) float64 { return float64(s.Puts) }, false},
	{"nereus_walstore_deletes_total", "Objects deleted.", func(s walstore.Stats) float64 { return float64(s.Deletes) }, false},
	{"nereus_walstore_flushes_total", "Group fdatasyncs.", func(s walstore.Stats) float64 { return float64(s.Flushes) }, false},
	{"nereus_walstore_copies_total", "Live objects copied forward out of old files.", func(s walstore.Stats) float64 { return float64(s.Copies) }, false},
	{"nereus_walstore_files_deleted_total", "Log files deleted.", func(s walstore.Stats) float64 { return float64(s.FilesDeleted) }, false},
}

func newWALStoreCollector(s *walstore.Store) *walStoreCollector {
	c := &walStoreCollector{store: s}
	for _, m := range walStoreMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return c
}

func (c *walStoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *walStoreCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Stats()
	for i, m := range walStoreMetrics {
		t := prometheus.CounterValue
		if m.gauge {
			t = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], t, m.get(s))
	}
}
