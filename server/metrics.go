package server

import (
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Version is the build's version string (set with -ldflags
// "-X github.com/nereusstream/nereus-go/server.Version=...").
var Version = "dev"

type metrics struct {
	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	appendEntries   prometheus.Counter
	appendBytes     prometheus.Counter
	readEntries     prometheus.Counter
	readBytes       prometheus.Counter
	frontendUp      *prometheus.GaugeVec
	durable         prometheus.Gauge
	backends        *prometheus.GaugeVec
	draining        prometheus.Gauge
	adminAuthDenied *prometheus.CounterVec
}

// newRegistry returns the process registry with Go runtime and process
// collectors and the build info.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nereus_build_info", Help: "Build information (always 1).",
	}, []string{"version", "goversion"})
	info.WithLabelValues(Version, runtime.Version()).Set(1)
	reg.MustRegister(info)
	return reg
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nereus_admin_http_requests_total", Help: "Admin HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nereus_admin_http_request_duration_seconds", Help: "Admin HTTP request latency by route pattern (long polls included).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
		appendEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nereus_rest_append_entries_total", Help: "Entries committed through the REST API.",
		}),
		appendBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nereus_rest_append_bytes_total", Help: "Payload bytes committed through the REST API.",
		}),
		readEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nereus_rest_read_entries_total", Help: "Entries returned by REST reads.",
		}),
		readBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nereus_rest_read_bytes_total", Help: "Payload bytes returned by REST reads.",
		}),
		frontendUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nereus_frontend_up", Help: "1 while a protocol front end is serving.",
		}, []string{"frontend"}),
		durable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nereus_storage_durable", Help: "1 if the storage backend keeps acknowledged data across restarts.",
		}),
		backends: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nereus_storage_backend_info", Help: "The stores under the stream core (always 1): object_store is file or s3, metadata is bolt, log or etcd.",
		}, []string{"object_store", "metadata"}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nereus_draining", Help: "1 once graceful shutdown began.",
		}),
		adminAuthDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nereus_admin_http_auth_denied_total", Help: "Admin HTTP requests refused by authentication (unauthenticated) or role (forbidden).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.httpRequests, m.httpDuration, m.appendEntries, m.appendBytes, m.readEntries,
		m.readBytes, m.frontendUp, m.durable, m.backends, m.draining, m.adminAuthDenied)
	return m
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument records request counts and latency per matched route pattern
// (never per raw path: stream names would explode label cardinality).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		m.httpRequests.WithLabelValues(route, r.Method, strconv.Itoa(code)).Inc()
		m.httpDuration.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}
