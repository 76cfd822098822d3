package server

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// meters is the process's OpenTelemetry meter provider, exported through
// the Prometheus registry served on /metrics: the storage packages (wal,
// stream/bkwal, objectstore/metered) record on OpenTelemetry meters and
// depend on no exporter; this is the one place their instruments become
// Prometheus families (an instrument "nereus.wal.producer.records" is
// nereus_wal_producer_records_total). A process without a registry gets
// no-op meters.
type meters struct {
	provider metric.MeterProvider
	shutdown func(context.Context) error
}

func newMeters(reg prometheus.Registerer) (meters, error) {
	if reg == nil {
		return meters{provider: noop.NewMeterProvider(), shutdown: func(context.Context) error { return nil }}, nil
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return meters{}, fmt.Errorf("metrics: OpenTelemetry Prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	return meters{provider: mp, shutdown: mp.Shutdown}, nil
}

// Meter returns the meter of one instrumentation scope (a package path).
func (m meters) Meter(scope string) metric.Meter { return m.provider.Meter(scope) }
